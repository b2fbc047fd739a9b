"""The one small HTTP client of the daemon, used by the CLI (and any other client: tray, scripts).

Standard library only, so a client command starts in a blink and imports nothing of the engine.
Every call opens its own connection: a streamed answer can then be abandoned (Ctrl-C) by closing
it, which is what tells the daemon to stop generating and free the slot.
"""

from __future__ import annotations

import http.client
import json
import socket
from collections.abc import Generator, Iterator
from typing import Any
from urllib.parse import urlsplit

from localserve.ground.places import operator_token_path
from localserve.ground.settings import OPERATOR_HEADER

JSON = dict[str, Any]

# Loads and first tokens may wait behind other models' work; a stuck daemon is still noticed.
DEFAULT_TIMEOUT_S = 600.0


def bare_name(name: str) -> str:
    """`smollm2:latest` as a user typed it: `smollm2` (Ollama's answers add the tag)."""
    return name[: -len(":latest")] if name.endswith(":latest") else name


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


class StreamCutOff(ClientError):
    """A streamed answer (or download) ended before its final event: the daemon or its engine
    went away mid-stream, or sent an error instead of the rest. Never a silent success."""

    def __init__(self, url: str, what: str, reason: str) -> None:
        super().__init__(f"the {what} was cut off: {reason}")
        self.url = url
        self.what = what
        self.reason = reason


# What a stream carries, as the messages of StreamCutOff name it.
ANSWER = "answer"
DOWNLOAD = "download"


class Client:
    """Typed calls for each endpoint the CLI uses. `url` is the daemon's base URL."""

    def __init__(self, url: str, timeout: float = DEFAULT_TIMEOUT_S) -> None:
        self.url = url.rstrip("/")
        parts = urlsplit(self.url)
        self._host = parts.hostname or "127.0.0.1"
        self._port = parts.port or 80
        self.timeout = timeout

    def _operator(self) -> dict[str, str]:
        """The local daemon's operator token, when this user can read it: the CLI may import
        from any folder and needs no key of its own (server/http/guard.py). Never sent elsewhere:
        another machine's daemon on the same port is not this one."""
        if self._host not in ("127.0.0.1", "localhost", "::1"):
            return {}
        try:
            token = operator_token_path(self._port).read_text().strip()
        except OSError:
            return {}
        return {OPERATOR_HEADER: token} if token else {}

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
        """Ollama's progress objects, one by one; an `{"error"}` object raises ApiError, and a
        stream that ends without its `success` object raises StreamCutOff."""
        succeeded = False
        for line in self._lines("POST", "/api/pull", {"model": name, "stream": True}, DOWNLOAD):
            event = json.loads(line)
            if "error" in event:
                raise ApiError(500, _message(event))
            succeeded = succeeded or event.get("status") == "success"
            yield event
        if not succeeded:
            raise StreamCutOff(self.url, DOWNLOAD, _closed(DOWNLOAD))

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

    def pin(self, name: str, pinned: bool) -> JSON:
        """Keep a loaded model in memory whatever its keep-alive (or let it go again)."""
        return self._json("POST", "/api/admin/pin", {"model": name, "pinned": pinned})

    # -- batches (OpenAI's Batch API) ----------------------------------------------------------

    def batches(self, limit: int = 100) -> list[JSON]:
        """The latest batches, newest first, with their status and request_counts."""
        return list(self._json("GET", f"/v1/batches?limit={limit}").get("data", []))

    # -- generation ----------------------------------------------------------------------------

    def chat(self, body: JSON) -> Generator[JSON, None, None]:
        """OpenAI's streamed chat chunks (the body gets `stream` and usage set here). Closing
        the iterator early closes the connection, which cancels the answer in the daemon.

        The answer is whole only once a chunk with a finish reason, the usage chunk and
        `data: [DONE]` have all come; a stream that ends before, or an error event in it,
        raises StreamCutOff, so that an engine that died mid-answer never reads as success."""
        body = {**body, "stream": True, "stream_options": {"include_usage": True}}
        finished = counted = False
        kind = ""  # the SSE `event:` name of the data line that follows, if any
        for line in self._lines("POST", "/v1/chat/completions", body, ANSWER):
            field, _, value = line.partition(b":")
            value = value.strip()
            if field == b"event":
                kind = value.decode(errors="replace")
                continue
            if field != b"data":
                continue  # SSE comments and ids
            if value == b"[DONE]":
                missing = [
                    what
                    for what, seen in (("a finish reason", finished), ("the usage", counted))
                    if not seen
                ]
                if missing:
                    reason = f"the stream ended without {' or '.join(missing)}"
                    raise StreamCutOff(self.url, ANSWER, reason)
                return
            event = _sse_data(value, kind)
            if "error" in event:
                raise StreamCutOff(
                    self.url, ANSWER, f"the daemon reported an error: {_message(event)}"
                )
            kind = ""
            choices = event.get("choices") or []
            finished = finished or any(choice.get("finish_reason") for choice in choices)
            counted = counted or bool(event.get("usage"))
            yield event
        raise StreamCutOff(self.url, ANSWER, _closed(ANSWER))

    # -- plumbing ------------------------------------------------------------------------------

    def _open(
        self,
        method: str,
        path: str,
        body: JSON | None,
        timeout: float | None,
        stream: str | None = None,
    ) -> tuple[http.client.HTTPConnection, http.client.HTTPResponse]:
        """Connect and send. A `stream` (what it carries) that fails once the daemon took the
        request raises StreamCutOff: the daemon was there, then went away."""
        conn = http.client.HTTPConnection(self._host, self._port, timeout=timeout or self.timeout)
        headers = {"Accept": "application/json", **self._operator()}
        payload = None
        if body is not None:
            payload = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        try:
            conn.connect()
        except OSError as exc:  # refused, unknown host, timed out
            conn.close()
            raise DaemonUnreachable(self.url, _reason(exc)) from exc
        try:
            conn.request(method, path, body=payload, headers=headers)
            response = conn.getresponse()
        except (OSError, http.client.HTTPException) as exc:
            conn.close()
            if stream is None:
                raise DaemonUnreachable(self.url, _reason(exc)) from exc
            raise StreamCutOff(self.url, stream, self._cut(exc, stream, started=False)) from exc
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

    def _lines(self, method: str, path: str, body: JSON | None, what: str) -> Iterator[bytes]:
        """The stream's non-empty lines until the daemon ends it. A read that fails (reset,
        a chunk cut short when the daemon died: IncompleteRead, silence past the timeout)
        raises StreamCutOff; a clean end just returns, and the caller judges if it was whole."""
        conn, response = self._open(method, path, body, None, what)
        try:
            while True:
                try:
                    line = response.readline()
                except (OSError, http.client.HTTPException) as exc:
                    raise StreamCutOff(self.url, what, self._cut(exc, what, True)) from exc
                if not line:
                    return
                line = line.strip()
                if line:
                    yield line
        finally:
            conn.close()

    def _cut(self, exc: BaseException, what: str, started: bool) -> str:
        """Why a stream broke, in the words of the StreamCutOff message."""
        if isinstance(exc, (socket.timeout, TimeoutError)):
            return f"the daemon sent nothing for {self.timeout:.0f} s"
        when = f"before the {what} ended" if started else "before it answered"
        # A daemon that died leaves a chunk cut short (IncompleteRead) or no response at all.
        closed = (http.client.IncompleteRead, http.client.RemoteDisconnected, BrokenPipeError)
        if isinstance(exc, closed):
            return f"the daemon closed the connection {when}"
        if isinstance(exc, ConnectionResetError):
            return f"the connection to the daemon was reset {when}"
        return f"reading from the daemon failed {when}: {exc or type(exc).__name__}"


def _closed(what: str) -> str:
    return f"the daemon closed the connection before the {what} ended"


def _sse_data(value: bytes, kind: str) -> JSON:
    """One SSE data payload as a JSON object; an `event: error` one, or one that is not JSON,
    comes back as `{"error": ...}`, since either way the answer cannot go on."""
    try:
        event = json.loads(value)
    except ValueError:
        text = value.decode(errors="replace")
        return {"error": text if kind == "error" else f"a line that is not JSON: {text[:80]}"}
    if kind == "error" and not (isinstance(event, dict) and "error" in event):
        return {"error": event}
    return event if isinstance(event, dict) else {"value": event}


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
