"""A request's priority class, from its body's `priority` or its X-Priority header.

Interactive is the default: chat, the CLI, the tray and FIM never have to ask for it. Background
requests (batches, a script's bulk prompts) yield their slots to interactive ones
(engine/batching/priorities.py). A value we do not know is a 400, not a silent default.
"""

from __future__ import annotations

from dataclasses import replace

from aiohttp import web

from localserve.ground.errors import BadRequest
from localserve.ground.sampling import SamplingParams
from localserve.server.http.readers import BODY

HEADER = "X-Priority"
CLASSES = ("interactive", "background")


def is_background(request: web.Request) -> bool:
    """Whether the request asks for background priority; the body's field wins the header."""
    body = request.get(BODY)
    value = body.get("priority") if isinstance(body, dict) else None
    where = "priority"
    if value is None:
        value, where = request.headers.get(HEADER), HEADER
    if value is None:
        return False
    if value not in CLASSES:
        raise BadRequest(f"'{where}' must be one of {', '.join(CLASSES)}, got {value!r}", where)
    return bool(value == "background")


def with_priority(request: web.Request, params: SamplingParams) -> SamplingParams:
    background = is_background(request)
    return params if params.background == background else replace(params, background=background)
