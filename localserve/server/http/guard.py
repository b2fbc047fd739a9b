"""Who may talk to the daemon, checked before any handler runs.

A local server listens where every web page the user opens can reach it:
- **Host.** A page on evil.example can re-resolve its name to 127.0.0.1 (DNS rebinding, as in
  Ollama's CVE-2024-28224) and read our answers; bound to loopback, only local names are served.
- **Origin.** A page can POST a "simple" request (text/plain) without any CORS preflight. A
  request whose Origin is not allowed is refused before it does anything, whatever its type.
  Allowed: no Origin at all (curl, editors, SDKs), pages on localhost at any port, editor
  webviews and app shells, and the operator's `origins`. Preflights get the origin itself back
  (never `*`), as llama.cpp's server does since it stopped reflecting any Origin.
- **Keys.** With `api_key` set, every endpoint but /health, / and /api/version wants it
  (`Authorization: Bearer KEY` or `X-Api-Key`); `admin_key` guards the endpoints that change
  the store or the residency. On loopback with no key, any Bearer is taken: editor plugins send
  "Bearer undefined", and some cannot set headers at all.
- **The operator.** The daemon leaves a fresh token in a file only its user can read; the CLI
  sends it, and passes every key check and may import from any folder (others only from the
  models folder and `import_roots`).
"""

from __future__ import annotations

import fnmatch
import hmac
import ipaddress
import logging
import os
import secrets
import socket
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from urllib.parse import urlsplit

from aiohttp import web

from localserve.ground.settings import OPERATOR_HEADER, Settings, operator_token_path
from localserve.server import ui
from localserve.server.http.errors import Refused

log = logging.getLogger(__name__)

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

# The page's own files hold no data: it loads, then asks for the key when the API wants one.
OPEN_PATHS = frozenset({"/health", "/", "/api/version", *ui.PATHS})
ADMIN_PATHS = frozenset(
    {
        "/api/pull",
        "/api/delete",
        "/api/admin/import",
        "/api/admin/scan",
        "/api/admin/load",
        "/api/admin/unload",
        "/api/admin/pin",
        "/api/admin/shutdown",
    }
)
# Editor webviews and desktop app shells: their pages are the user's own tools.
APP_SCHEMES = frozenset({"vscode-webview", "vscode-file", "app", "file", "tauri"})
METHODS = "GET, HEAD, POST, DELETE, OPTIONS"
HEADERS = (
    "authorization",
    "content-type",
    "openai-beta",
    "x-api-key",
    "x-stainless-*",
    "accept",
    "user-agent",
    "anthropic-version",
    "anthropic-beta",
    "anthropic-dangerous-direct-browser-access",
)


def is_loopback(host: str) -> bool:
    host = host.strip("[]").lower()
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _own_addresses() -> frozenset[str]:
    """This machine's names and addresses, as its other programs may call it."""
    names = {socket.gethostname().lower()}
    try:
        for info in socket.getaddrinfo(socket.gethostname(), None):
            names.add(str(info[4][0]).lower())
    except OSError:
        pass
    return frozenset(names)


def _host_name(header: str) -> str:
    """The name of a Host header, without its port: `[::1]:8080` is `::1`."""
    header = header.strip().lower()
    if header.startswith("["):
        return header[1:].partition("]")[0]
    return header.rpartition(":")[0] if header.count(":") == 1 else header


@dataclass(frozen=True)
class Guard:
    loopback: bool  # bound to a loopback address only
    hosts: tuple[str, ...]  # the operator's extra Host names (patterns)
    origins: tuple[str, ...]  # the operator's extra origins (patterns)
    api_key: str | None
    admin_key: str | None
    own: frozenset[str] = frozenset()
    operator: str | None = None  # the token the daemon left for this user's CLI

    @classmethod
    def for_settings(cls, settings: Settings) -> Guard:
        return cls(
            is_loopback(settings.host),
            settings.allowed_hosts,
            settings.origins,
            settings.api_key or None,
            settings.admin_key or None,
            _own_addresses(),
        )

    # -- the checks --------------------------------------------------------------------------

    def host_allowed(self, header: str | None) -> bool:
        if not header:  # HTTP/1.0 sends none; no page can make a browser do so
            return True
        name = _host_name(header)
        if any(fnmatch.fnmatchcase(name, pattern.lower()) for pattern in self.hosts):
            return True
        if not self.loopback and not self.hosts:
            return True  # bound beyond loopback with no names configured: any name
        return is_loopback(name) or name in self.own

    def origin_allowed(self, origin: str | None) -> bool:
        if origin is None:
            return True
        if any(p == "*" or fnmatch.fnmatchcase(origin, p) for p in self.origins):
            return True
        parts = urlsplit(origin)
        if parts.scheme in APP_SCHEMES:
            return True
        return parts.scheme in ("http", "https") and is_loopback(parts.hostname or "")

    def is_operator(self, request: web.Request) -> bool:
        sent = request.headers.get(OPERATOR_HEADER)
        return bool(self.operator and sent and hmac.compare_digest(sent, self.operator))

    def key_refusal(self, request: web.Request) -> Refused | None:
        """Why the request's key does not open its path, or None."""
        path = request.path
        if path in OPEN_PATHS:
            return None
        sent = _sent_key(request)
        if path in ADMIN_PATHS and self.admin_key is not None:
            if sent is not None and hmac.compare_digest(sent, self.admin_key):
                return None
            return Refused(
                401 if sent is None else 403,
                "this endpoint needs the admin key (admin_key)",
                "admin_key",
            )
        if self.api_key is None:
            return None
        allowed = [k for k in (self.api_key, self.admin_key) if k is not None]
        if sent is not None and any(hmac.compare_digest(sent, k) for k in allowed):
            return None
        why = "no API key was sent" if sent is None else "the API key is wrong"
        return Refused(401, f"{why}: send Authorization: Bearer KEY or X-Api-Key", "api_key")


def _sent_key(request: web.Request) -> str | None:
    key = request.headers.get("X-Api-Key")
    if key:
        return key
    scheme, _, value = request.headers.get("Authorization", "").partition(" ")
    if scheme.lower() != "bearer" or not value.strip():
        return None
    return value.strip()


GUARD = web.AppKey("guard", Guard)
OPERATOR = "localserve.operator"  # on a request: it came from this user's CLI


@web.middleware
async def guard_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    guard = request.app[GUARD]
    if not guard.host_allowed(request.headers.get("Host")):
        raise Refused(
            403,
            f"the Host '{request.headers.get('Host')}' is not this machine's; "
            "add it to allowed_hosts (--allowed-hosts, LOCALSERVE_ALLOWED_HOSTS) to "
            "serve it",
            "allowed_hosts",
        )
    origin = request.headers.get("Origin")
    if not guard.origin_allowed(origin):
        raise Refused(
            403,
            f"requests from pages on {origin} are not allowed; add the origin "
            "to origins (--origins, LOCALSERVE_ORIGINS) to allow them",
            "origins",
        )
    if request.method == "OPTIONS":
        return _preflight(request)
    request[OPERATOR] = guard.is_operator(request)
    refusal = None if request[OPERATOR] else guard.key_refusal(request)
    if refusal is not None:
        raise refusal
    return await handler(request)


def _preflight(request: web.Request) -> web.Response:
    asked = request.headers.get("Access-Control-Request-Headers", "")
    wanted = [h.strip().lower() for h in asked.split(",") if h.strip()]
    refused = [h for h in wanted if not any(fnmatch.fnmatchcase(h, p) for p in HEADERS)]
    if refused:
        raise Refused(
            403, f"the header {refused[0]} is not allowed in requests from pages", "origins"
        )
    headers = {"Access-Control-Allow-Methods": METHODS, "Access-Control-Max-Age": "600"}
    if wanted:
        headers["Access-Control-Allow-Headers"] = ", ".join(wanted)
    return web.Response(status=204, headers=headers)


async def add_cors_headers(request: web.Request, response: web.StreamResponse) -> None:
    """Every answer to an allowed page names that page's origin, streamed ones too (this runs
    as the headers are sent)."""
    origin = request.headers.get("Origin")
    if origin is not None and request.app[GUARD].origin_allowed(origin):
        response.headers["Access-Control-Allow-Origin"] = origin
        response.headers["Access-Control-Allow-Credentials"] = "true"
        # A page may read the request's id (server/http/request_log.py), to quote it in a report.
        response.headers["Access-Control-Expose-Headers"] = "X-Request-Id"
        response.headers.add("Vary", "Origin")


def install(app: web.Application, settings: Settings) -> None:
    app[GUARD] = Guard.for_settings(settings)
    app.on_response_prepare.append(add_cors_headers)


@contextmanager
def operator_token(app: web.Application, port: int) -> Iterator[None]:
    """Leave a fresh operator token where only this user can read it, for as long as the
    daemon serves; a daemon that cannot write it serves without one."""
    path = operator_token_path(port)
    token = secrets.token_urlsafe(32)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(token)
        app[GUARD] = replace(app[GUARD], operator=token)
    except OSError as exc:
        log.warning("cannot write the operator token %s (%s): the CLI will need keys", path, exc)
    try:
        yield
    finally:
        path.unlink(missing_ok=True)
