"""Engine errors in OpenAI's wire format: {"error": {"message", "type", "param", "code"}}."""

from __future__ import annotations

import logging

from aiohttp import web

from localserve.engine.errors import (
    BadRequest,
    ContextOverflow,
    DoesNotFit,
    EngineError,
    LoadFailed,
    ModelNotFound,
    QueueFull,
)

log = logging.getLogger(__name__)


def openai_error(
    status: int, message: str, kind: str, param: str | None = None, code: str | None = None
) -> web.Response:
    return web.json_response(
        {"error": {"message": message, "type": kind, "param": param, "code": code}},
        status=status,
    )


def from_exception(exc: BaseException) -> web.Response:
    """The one place an engine error becomes an OpenAI status and body."""
    if isinstance(exc, ContextOverflow):
        return openai_error(400, str(exc), "invalid_request_error", exc.param, "context_length_exceeded")
    if isinstance(exc, BadRequest):
        return openai_error(400, str(exc), "invalid_request_error", exc.param)
    if isinstance(exc, ModelNotFound):
        return openai_error(404, str(exc), "invalid_request_error", "model", "model_not_found")
    if isinstance(exc, QueueFull):
        return openai_error(503, str(exc), "server_error", None, "queue_full")
    if isinstance(exc, DoesNotFit):
        return openai_error(503, str(exc), "server_error", None, "model_does_not_fit")
    if isinstance(exc, LoadFailed):
        return openai_error(500, str(exc), "server_error", None, "model_load_failed")
    if isinstance(exc, EngineError):
        return openai_error(500, str(exc), "server_error")
    log.exception("unexpected error", exc_info=exc)
    return openai_error(500, f"internal error: {exc}", "server_error")
