"""Bounds on what one request may make the daemon hold or do, each a clear 4xx, so that no
request can crash it or slow everyone else down: the size of a body and the time it may take to
arrive (a slowloris client trickling bytes). Its JSON's nesting and integers are bounded where
it is parsed (bounded_json.py). The connections' bounds (how many, how long a head or an idle
connection may take) are in connections.py; the bounds on fields (stop strings, roles,
logit_bias, max_tokens) are with the fields, in validation.py and requests.py; those on the
work a body asks for (its messages, inputs and tools) in bounds.py.
"""

from __future__ import annotations

import asyncio

from aiohttp import web

from localserve.ground.settings import Settings
from localserve.ground.units import format_size
from localserve.server.http.refused import Refused

# Endpoints whose bodies carry prompts, conversations or inputs to embed: settings.max_body.
# Every other endpoint takes a small JSON object.
LARGE_BODIES = frozenset(
    {
        "/v1/chat/completions",
        "/v1/completions",
        # Agents' conversations: Claude Code's and Codex's pass 1 MiB in long sessions.
        "/v1/messages",
        "/v1/messages/count_tokens",
        "/v1/responses",
        "/v1/responses/compact",
        "/v1/embeddings",
        "/api/generate",
        "/api/chat",
        "/api/embed",
        "/api/embeddings",
        "/infill",
    }
)
SMALL_BODY = 1 << 20


def body_limit(path: str, settings: Settings) -> int:
    return settings.max_body if path in LARGE_BODIES else SMALL_BODY


async def read_body(request: web.Request, settings: Settings) -> bytes:
    """The whole body, within its size and within `body_timeout` seconds."""
    limit = body_limit(request.path, settings)
    if request.content_length is not None and request.content_length > limit:
        raise _too_large(request.path, limit)
    try:
        return await asyncio.wait_for(_read(request, limit), settings.body_timeout)
    except asyncio.TimeoutError:
        raise Refused(
            408,
            f"the request body did not arrive within {settings.body_timeout:g} "
            "seconds (body_timeout)",
            "body_timeout",
        ) from None


async def _read(request: web.Request, limit: int) -> bytes:
    parts: list[bytes] = []
    size = 0
    async for chunk in request.content.iter_any():
        size += len(chunk)
        if size > limit:
            raise _too_large(request.path, limit)
        parts.append(chunk)
    return b"".join(parts)


def _too_large(path: str, limit: int) -> Refused:
    setting = " (max_body)" if path in LARGE_BODIES else ""
    return Refused(
        413,
        f"the request body is larger than {format_size(limit)}, the most {path} takes{setting}",
        "max_body" if setting else None,
    )
