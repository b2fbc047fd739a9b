"""The one small HTTP client of the daemon, used by the CLI (and any other client: tray, scripts).

Standard library only, so a client command starts in a blink and imports nothing of the engine.
Every call opens its own connection: a streamed answer can then be abandoned (Ctrl-C) by closing
it, which is what tells the daemon to stop generating and free the slot.
"""

from __future__ import annotations

import http.client
import json
import socket
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

JSON = dict[str, Any]

# Loads and first tokens may wait behind other models' work; a stuck daemon is still noticed.
DEFAULT_TIMEOUT_S = 600.0


class ClientError(Exception):
    """Anything that kept a request from getting its answer."""


class DaemonUnreachable(ClientError):
    """Nothing answered at the address: the daemon is not running there (or not yet)."""

    def __init__(self, url: str, reason: str) -> None:
        super().__init__(f"cannot reach the localserve daemon at {url} ({reason})")
        self.url = url
        self.reason = reason


class ApiError(ClientError):
    """The daemon answered with an error; `message` is its own words."""

    def __init__(self, status: int, message: str, endpoint: str = "") -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.endpoint = endpoint

    @property
    def route_missing(self) -> bool:
        """The daemon is older than this client and has no such endpoint (aiohttp's own 404)."""
        return self.status in (404, 405) and self.message in ("Not Found", "Method Not Allowed")


class Client:
    """Typed calls for each endpoint the CLI uses. `url` is the daemon's base URL."""

    def __init__(self, url: str, timeout: float = DEFAULT_TIMEOUT_S) -> None:
        self.url = url.rstrip("/")
        parts = urlsplit(self.url)
        self._host = parts.hostname or "127.0.0.1"
        self._port = parts.port or 80
        self.timeout = timeout

    # -- the daemon ----------------------------------------------------------------------------

    def health(self, timeout: float = 5.0) -> JSON:
        return self._json("GET", "/health", timeout=timeout)

    def stats(self) -> JSON:
        return self._json("GET", "/api/admin/stats")

    def shutdown(self) -> JSON:
        return self._json("POST", "/api/admin/shutdown", {})

    # -- models on disk (Ollama's API) ---------------------------------------------------------

    def tags(self) -> list[JSON]:
        return list(self._json("GET", "/api/tags").get("models", []))

    def show(self, name: str) -> JSON:
        return self._json("POST", "/api/show", {"model": name})

    def delete(self, name: str) -> None:
        self._json("DELETE", "/api/delete", {"model": name})

    def import_model(self, path: str, name: str | None, copy: bool) -> JSON:
        body: JSON = {"path": path, "copy": copy}
        if name:
            body["model"] = name
        return self._json("POST", "/api/admin/import", body)

    def scan(self, path: str) -> list[JSON]:
        return list(self._json("POST", "/api/admin/scan", {"path": path}).get("models", []))

    def pull(self, name: str) -> Iterator[JSON]:
        """Ollama's progress objects, one by one; an `{"error"}` object raises ApiError."""
        for line in self._lines("POST", "/api/pull", {"model": name, "stream": True}):
            event = json.loads(line)
            if "error" in event:
                raise ApiError(500, _message(event))
            yield event

    # -- models in memory ----------------------------------------------------------------------

    def ps(self) -> list[JSON]:
        return list(self._json("GET", "/api/ps").get("models", []))

    def load(self, name: str, keep_alive: str | None = None) -> JSON:
        body: JSON = {"model": name}
        if keep_alive is not None:
            body["keep_alive"] = keep_alive
        return self._json("POST", "/api/admin/load", body)

    def unload(self, name: str) -> JSON:
        return self._json("POST", "/api/admin/unload", {"model": name})

    # -- generation ----------------------------------------------------------------------------

    def chat(self, body: JSON) -> Iterator[JSON]:
        """OpenAI's streamed chat chunks (the body gets `stream` and usage set here). Closing
        the iterator early closes the connection, which cancels the answer in the daemon."""
        body = {**body, "stream": True, "stream_options": {"include_usage": True}}
        for line in self._lines("POST", "/v1/chat/completions", body):
            if not line.startswith(b"data:"):
                continue
            data = line[5:].strip()
            if data == b"[DONE]":
                return
            event = json.loads(data)
            if "error" in event:
                raise ApiError(500, _message(event))
            yield event

    # -- plumbing ------------------------------------------------------------------------------

    def _open(
        self, method: str, path: str, body: JSON | None, timeout: float | None
    ) -> tuple[http.client.HTTPConnection, http.client.HTTPResponse]:
        conn = http.client.HTTPConnection(self._host, self._port, timeout=timeout or self.timeout)
        headers = {"Accept": "application/json"}
        payload = None
        if body is not None:
            payload = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        try:
            conn.request(method, path, body=payload, headers=headers)
            response = conn.getresponse()
        except (ConnectionError, socket.gaierror, socket.timeout, OSError) as exc:
            conn.close()
            raise DaemonUnreachable(self.url, _reason(exc)) from exc
        except BaseException:
            conn.close()
            raise
        if response.status >= 400:
            try:
                raw = response.read()
            finally:
                conn.close()
            raise ApiError(response.status, _error_text(raw, response.reason), f"{method} {path}")
        return conn, response

    def _json(
        self, method: str, path: str, body: JSON | None = None, timeout: float | None = None
    ) -> JSON:
        conn, response = self._open(method, path, body, timeout)
        try:
            raw = response.read()
        except OSError as exc:
            raise DaemonUnreachable(self.url, _reason(exc)) from exc
        finally:
            conn.close()
        if not raw.strip():
            return {}
        value = json.loads(raw)
        return value if isinstance(value, dict) else {"value": value}

    def _lines(self, method: str, path: str, body: JSON | None) -> Iterator[bytes]:
        conn, response = self._open(method, path, body, None)
        try:
            while True:
                try:
                    line = response.readline()
                except OSError as exc:
                    raise DaemonUnreachable(self.url, _reason(exc)) from exc
                if not line:
                    return
                line = line.strip()
                if line:
                    yield line
        finally:
            conn.close()


def _message(event: JSON) -> str:
    error = event.get("error")
    if isinstance(error, dict):
        return str(error.get("message") or error)
    return str(error)


def _error_text(raw: bytes, reason: str) -> str:
    try:
        return _message(json.loads(raw))
    except (ValueError, AttributeError):
        text = raw.decode(errors="replace").strip()
        return text or reason


def _reason(exc: BaseException) -> str:
    if isinstance(exc, ConnectionRefusedError):
        return "connection refused"
    if isinstance(exc, socket.gaierror):
        return f"unknown host: {exc.strerror or exc}"
    if isinstance(exc, (socket.timeout, TimeoutError)):
        return "timed out"
    return str(exc) or type(exc).__name__
