"""Who may talk to the daemon, checked before any handler runs.

A local server listens where every web page the user opens can reach it:
- **Host.** A page on evil.example can re-resolve its name to 127.0.0.1 (DNS rebinding, as in
  Ollama's CVE-2024-28224) and read our answers; bound to loopback, only local names are served.
  Host and Origin are read by the WHATWG URL standard, as the browser read them (hosts.py).
- **Origin.** A page can POST a "simple" request (text/plain) without any CORS preflight. A
  request whose Origin is not allowed is refused before it does anything, whatever its type.
  Allowed: no Origin at all (curl, editors, SDKs), pages on localhost at any port, editor
  webviews and app shells, and the operator's `origins`. Preflights get the origin itself back
  (never `*`), as llama.cpp's server does since it stopped reflecting any Origin.
- **Keys.** With `api_key` set, every endpoint but /health, /, /api/version and the web page
  (/ui and its files) wants it (`Authorization: Bearer KEY` or `X-Api-Key`); `admin_key`
  guards the endpoints that change the store or the residency. On loopback with no key, any
  Bearer is taken: editor plugins send "Bearer undefined", and some cannot set headers at all.
- **The operator.** The daemon leaves a fresh token in a file only its user can read; the CLI
  sends it, and passes every key check and may import from any folder (others only from the
  models folder and `import_roots`).
"""

from __future__ import annotations

import fnmatch
import hmac
import logging
import os
import secrets
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path

from aiohttp import web

from localserve.ground.places import operator_token_path
from localserve.ground.settings import OPERATOR_HEADER, Settings
from localserve.server import ui
from localserve.server.http.hosts import (
    WEB_SCHEMES,
    is_loopback_host,
    own_hosts,
    parse_host,
    parse_origin,
)
from localserve.server.http.hosts import is_loopback as is_loopback  # daemon.py's, as before
from localserve.server.http.refused import Refused

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
            own_hosts(),
        )

    # -- the checks --------------------------------------------------------------------------

    def host_refusal(self, header: str | None) -> Refused | None:
        """Why a Host is not served, or None: 400 for a value that is no Host (RFC 9110 wants
        that), 403 for a host that is not this machine's."""
        if not header:  # HTTP/1.0 sends none, RFC 9110 an empty one; no browser does either
            return None
        host = parse_host(header)
        if host is None:
            return Refused(400, f"the Host '{header}' is not a host name and port")
        if self._host_allowed(host):
            return None
        return Refused(
            403,
            f"the Host '{header}' is not this machine's; add it to allowed_hosts "
            "(--allowed-hosts, LOCALSERVE_ALLOWED_HOSTS) to serve it",
            "allowed_hosts",
        )

    def host_allowed(self, header: str | None) -> bool:
        return self.host_refusal(header) is None

    def _host_allowed(self, host: str) -> bool:
        # An IPv6 pattern may be written with its brackets or without.
        if any(_matches(name, self.hosts) for name in {host, host.strip("[]")}):
            return True
        if not self.loopback and not self.hosts:
            return True  # bound beyond loopback with no names configured: any name
        return is_loopback_host(host) or host in self.own

    def origin_allowed(self, header: str | None) -> bool:
        if header is None:  # no page: curl, editors, SDKs
            return True
        if "*" in self.origins:  # the operator opened the API to every page, `null` too
            return True
        origin = parse_origin(header)
        if origin is None:
            return False
        if _matches(origin.text, self.origins) or origin.scheme in APP_SCHEMES:
            return True
        return origin.scheme in WEB_SCHEMES and is_loopback_host(origin.host)

    def is_operator(self, request: web.Request) -> bool:
        sent = request.headers.get(OPERATOR_HEADER)
        return bool(self.operator and sent and _same_key(sent, self.operator))

    def key_refusal(self, request: web.Request) -> Refused | None:
        """Why the request's key does not open its path, or None."""
        path = request.path
        if path in OPEN_PATHS:
            return None
        sent = _sent_key(request)
        if path in ADMIN_PATHS and self.admin_key is not None:
            if sent is not None and _same_key(sent, self.admin_key):
                return None
            return Refused(
                401 if sent is None else 403,
                "this endpoint needs the admin key (admin_key)",
                "admin_key",
            )
        if self.api_key is None:
            return None
        allowed = [k for k in (self.api_key, self.admin_key) if k is not None]
        if sent is not None and any(_same_key(sent, k) for k in allowed):
            return None
        why = "no API key was sent" if sent is None else "the API key is wrong"
        return Refused(401, f"{why}: send Authorization: Bearer KEY or X-Api-Key", "api_key")


def _matches(name: str, patterns: tuple[str, ...]) -> bool:
    """Whether a whole host or origin, as the URL parser gave it, matches one of the operator's
    patterns (case and a root dot as in the headers)."""
    return any(fnmatch.fnmatchcase(name, p.lower().removesuffix(".")) for p in patterns)


def _same_key(sent: str, key: str) -> bool:
    """Compared in constant time, as bytes: `compare_digest` refuses a str that is not ASCII,
    and a header may hold any byte (aiohttp hands those over as surrogates)."""
    return hmac.compare_digest(
        sent.encode("utf-8", "surrogatepass"), key.encode("utf-8", "surrogatepass")
    )


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
    refusal = guard.host_refusal(request.headers.get("Host"))
    if refusal is not None:
        raise refusal
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
        _write_private(path, token)
        app[GUARD] = replace(app[GUARD], operator=token)
    except OSError as exc:
        log.warning("cannot write the operator token %s (%s): the CLI will need keys", path, exc)
    try:
        yield
    finally:
        path.unlink(missing_ok=True)


def _write_private(path: Path, text: str) -> None:
    """Write a new file only this user can read. Never through what is already at the path: a
    link planted there would have the token written wherever it points, so the old entry is
    removed (unlink removes a link, not its target) and the new file must be created afresh
    (O_EXCL fails on anything there, a link planted in between included)."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    path.unlink(missing_ok=True)
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
    with os.fdopen(os.open(path, flags, 0o600), "w") as f:
        f.write(text)
