"""Engine errors at the HTTP edge: one status mapping, and each API face's own body shape.

OpenAI clients expect {"error": {"message", "type", "param", "code"}}; Ollama clients expect
{"error": "..."}; Anthropic's (/v1/messages) {"type": "error", "error": {"type", "message"}}.
The status is the same for all three.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from aiohttp import web
from aiohttp.http_exceptions import HttpProcessingError

from localserve.formats import BadModelFile
from localserve.ground.errors import (
    BadRequest,
    ContextOverflow,
    DoesNotFit,
    EngineError,
    EngineStopped,
    LoadFailed,
    ModelBusy,
    ModelNotFound,
    QueueFull,
    UpstreamUnavailable,
)
from localserve.server.http.refused import Refused
from localserve.store.hub import PullError
from localserve.store.importer import OutsideRoots

log = logging.getLogger(__name__)


# What a 503 tells a client to wait, in seconds: a stream's step, or a slot's freeing, is
# sooner than a client's own backoff would guess.
RETRY_AFTER_S = "1"


@dataclass(frozen=True)
class HttpError:
    status: int
    message: str
    kind: str = "invalid_request_error"
    param: str | None = None
    code: str | None = None


# An error message quotes what the client sent (a role, a kind, a value out of range): a
# quoted value of 900 KB came back whole. Its middle is cut, so the words around it stay.
MAX_MESSAGE = 2000


def clipped(message: str) -> str:
    """`message`, its middle cut where it is longer than MAX_MESSAGE characters."""
    if len(message) <= MAX_MESSAGE:
        return message
    head, tail = MAX_MESSAGE * 2 // 3, MAX_MESSAGE // 3
    cut = len(message) - head - tail
    return f"{message[:head]}... ({cut} characters cut) ...{message[-tail:]}"


def classify(exc: BaseException) -> HttpError:
    """The one place an engine error becomes a status, a type and a code."""
    msg = clipped(str(exc))
    if isinstance(exc, Refused):
        kind = Refused.KINDS.get(exc.status, "invalid_request_error")
        return HttpError(exc.status, msg, kind, param=exc.param, code=exc.code)
    if isinstance(exc, ContextOverflow):
        return HttpError(400, msg, param=exc.param, code="context_length_exceeded")
    if isinstance(exc, BadRequest):
        return HttpError(400, msg, param=exc.param)
    if isinstance(exc, ModelNotFound):
        return HttpError(404, msg, param="model", code="model_not_found")
    if isinstance(exc, QueueFull):
        return HttpError(503, msg, "server_error", code="queue_full")
    if isinstance(exc, EngineStopped):
        # The next request restarts the engine: a client may retry.
        return HttpError(503, msg, "server_error", code="engine_stopped")
    if isinstance(exc, UpstreamUnavailable):
        return HttpError(503, msg, "server_error", param="model", code="upstream_unavailable")
    if isinstance(exc, ModelBusy):
        return HttpError(503, msg, "server_error", code="model_busy")
    if isinstance(exc, DoesNotFit):
        return HttpError(507, msg, "server_error", code="model_does_not_fit")
    if isinstance(exc, LoadFailed):
        return HttpError(500, msg, "server_error", code="model_load_failed")
    if isinstance(exc, PullError):
        return HttpError(exc.status, msg, "server_error", code="pull_failed")
    if isinstance(exc, OutsideRoots):
        return HttpError(403, msg, "permission_error", param="path")
    if isinstance(exc, BadModelFile):
        return HttpError(400, msg, param="path", code="bad_model_file")
    if isinstance(exc, EngineError):
        return HttpError(500, msg, "server_error")
    if isinstance(exc, web.HTTPException):
        return HttpError(exc.status, exc.reason or "error")
    if isinstance(exc, web.RequestPayloadError):  # a body its Content-Encoding cannot decode, ...
        cause = exc.__cause__  # the parser's error, whose message is the words alone
        said = cause.message if isinstance(cause, HttpProcessingError) else msg
        return HttpError(400, f"the request body cannot be read: {said}")
    log.error("unexpected error", exc_info=exc)
    return HttpError(500, f"internal error: {exc}", "server_error")


def openai_error(err: HttpError) -> web.Response:
    body = {
        "error": {"message": err.message, "type": err.kind, "param": err.param, "code": err.code}
    }
    return web.json_response(body, status=err.status)


def ollama_error(err: HttpError) -> web.Response:
    return web.json_response({"error": err.message}, status=err.status)


# Anthropic's error types, by status: its clients raise a class per type.
ANTHROPIC_KINDS = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    503: "overloaded_error",
}


def anthropic_error(err: HttpError) -> web.Response:
    kind = ANTHROPIC_KINDS.get(
        err.status, "api_error" if err.status >= 500 else "invalid_request_error"
    )
    body = {"type": "error", "error": {"type": kind, "message": err.message}}
    return web.json_response(body, status=err.status)


def error_response(request: web.Request, exc: BaseException) -> web.Response:
    """Ollama's paths answer in Ollama's shape, Anthropic's in Anthropic's; everything else in
    OpenAI's."""
    err = classify(exc)
    if request.path.startswith("/api/"):
        response = ollama_error(err)
    elif request.path.startswith("/v1/messages"):
        response = anthropic_error(err)
    else:
        response = openai_error(err)
    if err.status == 503:  # each is a moment's want of room: a full queue, every slot busy
        response.headers["Retry-After"] = RETRY_AFTER_S
    return response
