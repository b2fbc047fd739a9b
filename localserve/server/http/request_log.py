"""One log line per request, when it ends, and the request's id.

The id is the client's `X-Request-Id` when it sends a usable one, else a new one; it goes back
in the answer's `X-Request-Id` header (set as the answer is prepared, so a stream has it too).
The line gives the face, model, status, prompt and cached tokens, generated tokens, time to
first token, total time, and why the answer ended; as fields of the log record too
(`request`), which `--log-format json` writes out. Prompts are logged only with
`--log-prompts`. Polls (health, metrics, /api/ps, version) log at DEBUG, so a tray or a
scraper does not flood the log.

The path is logged with its control characters, whitespace and backslashes escaped (`\\x0a`):
aiohttp percent-decodes it, so `/x%0aINFO ...` would otherwise forge a second log line.

The same record feeds /metrics (metrics.py) once, at the end.
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

from aiohttp import web

from localserve.engine.residency.reloads import RELOAD_HEADER
from localserve.engine.worker_client.resident import ResidentModel
from localserve.engine.worker_client.stream import RequestStream
from localserve.ground.pin import Pin
from localserve.ground.sampling import SamplingParams
from localserve.ground.units import KeepAlive
from localserve.server.http.metrics import METRICS
from localserve.server.http.priority import with_priority
from localserve.server.http.readers import BODY
from localserve.server.http.record import CLIENT_LEFT, Record
from localserve.server.http.state import MANAGER

log = logging.getLogger("localserve.requests")

HEADER = "X-Request-Id"
# A client's id is echoed only when it is short and printable: it goes into logs and headers.
_USABLE_ID = re.compile(r"[A-Za-z0-9._:\-]{1,128}")
_POLLS = frozenset({"/health", "/metrics", "/api/ps", "/api/version", "/"})
# Printable ASCII but space and backslash: a path of only these is logged as it is.
_PLAIN = re.compile(r"[!-\[\]-~]*")

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


RECORD = "localserve.record"
LOG_PROMPTS = web.AppKey("log_prompts", bool)


def face_of(path: str) -> str:
    if path.startswith("/v1/messages"):
        return "anthropic"
    if path.startswith("/v1/responses"):
        return "responses"
    if path.startswith("/v1/"):
        return "openai"
    if path.startswith("/api/admin/"):
        return "admin"
    if path.startswith("/api/"):
        return "ollama"
    if path in ("/infill", "/completion"):
        return "llama.cpp"
    return "daemon"


def loggable(text: str) -> str:
    """`text` as one field of one log line: each character that could end the line or the field
    (a control character, whitespace, a line separator, a lone surrogate from bytes that were
    no UTF-8) is escaped as Python writes it, and so is the backslash, so that no escape can
    be faked."""
    if _PLAIN.fullmatch(text):
        return text
    return "".join(
        c if c.isprintable() and not c.isspace() and c != "\\" else _escaped(c) for c in text
    )


def _escaped(c: str) -> str:
    n = ord(c)
    if c == "\\":
        return "\\\\"
    return f"\\x{n:02x}" if n < 0x100 else f"\\u{n:04x}" if n < 0x10000 else f"\\U{n:08x}"


def record_of(request: web.Request) -> Record | None:
    return request.get(RECORD)


@web.middleware
async def request_log_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Outermost: it sees the status the error middleware gave, and a client that left."""
    given = request.headers.get(HEADER, "")
    rid = given if _USABLE_ID.fullmatch(given) else uuid.uuid4().hex
    record = Record(rid, face_of(request.path), loggable(request.path), time.monotonic())
    request[RECORD] = record
    try:
        response = await handler(request)
        record.status = response.status
        return response
    except (asyncio.CancelledError, ConnectionResetError):
        record.status = CLIENT_LEFT  # also one that closed as its answer's last bytes went
        raise
    except web.HTTPException as exc:  # redirects and the like, which pass the error middleware
        record.status = exc.status
        raise
    finally:
        record.seconds = time.monotonic() - record.started
        _finish(request, record)


def _finish(request: web.Request, record: Record) -> None:
    metrics = request.app.get(METRICS)  # absent with --no-metrics
    if metrics is not None:
        metrics.finished(record)
    level = logging.DEBUG if request.path in _POLLS else logging.INFO
    if not log.isEnabledFor(level):
        return
    fields = record.fields()
    if request.app.get(LOG_PROMPTS) and record.sequence is not None:
        fields["prompt"] = _prompt_text(request)
    log.log(level, "request %s", record.line(fields), extra={"request": fields})


def _prompt_text(request: web.Request) -> Any:
    """What the client asked, as it sent it, for --log-prompts."""
    body = request.get(BODY) or {}
    return body.get("messages") or body.get("prompt") or body.get("input_prefix")


def notice(request: web.Request, header: str, text: str) -> None:
    """Tell the client, in `header`, and the log line, what the server changed of its request
    rather than refuse it. Set before the answer is prepared, as every face does."""
    record = record_of(request)
    if record is not None:
        record.notices[header] = text


async def add_record_headers(request: web.Request, response: web.StreamResponse) -> None:
    record = record_of(request)
    if record is not None:
        response.headers[HEADER] = record.id
        response.headers.update(record.notices)


@asynccontextmanager
async def generation(
    request: web.Request,
    model: ResidentModel,
    prompt: list[int] | str,
    params: SamplingParams,
    prompt_field: str = "prompt",
    want_tokens: bool = False,
) -> AsyncIterator[RequestStream]:
    """`model.generation` (of tokens, or of a rendered prompt's text), with the stream kept on
    the request's record for the log line and the metrics (every face generates through
    here). Its grammar was checked already (grammars.py)."""
    params = with_priority(request, params)
    async with model.generation(prompt, params, prompt_field, want_tokens) as seq:
        record = record_of(request)
        if record is not None:
            record.model, record.sequence = model.name, seq
        yield seq


def install(app: web.Application, log_prompts: bool) -> None:
    app[LOG_PROMPTS] = log_prompts
    app.on_response_prepare.append(add_record_headers)


@asynccontextmanager
async def held(
    request: web.Request, name: str, keep_alive: KeepAlive, pin: Pin
) -> AsyncIterator[ResidentModel]:
    """The model held for a request whose options `pin`: where it runs as it is loaded, not
    reloaded for them (engine/residency/reloads.py), the answer's `X-Localserve-Reload` header
    says so."""
    manager = request.app[MANAGER]
    async with manager.acquire(name, keep_alive, pin) as model:
        why = manager.deferred(model, pin)
        if why is not None:
            notice(request, RELOAD_HEADER, why)
        yield model
