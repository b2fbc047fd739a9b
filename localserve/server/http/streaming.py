"""Streamed answers: server-sent events, data-only (OpenAI's chat) or named (Anthropic's,
OpenAI's Responses), and Ollama's NDJSON lines.

While a long prompt prefills nothing else would be written for seconds or minutes, and clients
time out on a silent stream: every KEEPALIVE_S with nothing new, a stream gets an SSE comment,
which every SSE reader skips (Lemonade sends `: ping` every second; Ollama's NDJSON has no such
line, so its streams get none).
"""

from __future__ import annotations

from typing import Any

import msgspec
from aiohttp import web

# msgspec, not json.dumps: a streamed answer encodes an event per token, and on a small machine
# the daemon's CPU per token is taken from the decode's cores.
_encode = msgspec.json.encode


async def open_sse(request: web.Request) -> web.StreamResponse:
    response = web.StreamResponse(
        headers={
            "Content-Type": "text/event-stream",
            "Cache-Control": "no-cache",
            "X-Accel-Buffering": "no",
        }
    )
    await response.prepare(request)
    return response


async def open_ndjson(request: web.Request) -> web.StreamResponse:
    response = web.StreamResponse(headers={"Content-Type": "application/x-ndjson"})
    await response.prepare(request)
    return response


KEEPALIVE_S = 1.0


async def send_keepalive(response: web.StreamResponse) -> None:
    await response.write(b": keep-alive\n\n")


async def send_event(response: web.StreamResponse, payload: dict[str, Any]) -> None:
    await response.write(b"data: " + _encode(payload) + b"\n\n")


async def send_named(response: web.StreamResponse, event: str, payload: dict[str, Any]) -> None:
    """An event with a name, as Anthropic's and OpenAI's Responses streams write them: the name
    again as the payload's `type`."""
    data = _encode({"type": event, **payload})
    await response.write(b"event: " + event.encode() + b"\ndata: " + data + b"\n\n")


async def send_line(response: web.StreamResponse, payload: dict[str, Any]) -> None:
    """A line of NDJSON, as Ollama streams its answers and progress."""
    await response.write(_encode(payload) + b"\n")


async def send_done(response: web.StreamResponse) -> None:
    await response.write(b"data: [DONE]\n\n")
    await response.write_eof()
