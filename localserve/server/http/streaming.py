"""Streamed answers: server-sent events, data-only (OpenAI's chat) or named (Anthropic's,
OpenAI's Responses), and Ollama's NDJSON lines.

While a long prompt prefills nothing else would be written for seconds or minutes, and clients
time out on a silent stream: every KEEPALIVE_S with nothing new, a stream gets an SSE comment,
which every SSE reader skips (Lemonade sends `: ping` every second; Ollama's NDJSON has no such
line, so its streams get none).

A file is sent through the transport a chunk at a time (`send_file`), not by aiohttp's
FileResponse: its sendfile writes around the transport, so a client that reads none of a
download would hold its handler unseen by the connection table (connections.py, "Slow
readers"), which sees a client's reading by the transport's buffer.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Mapping
from pathlib import Path
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


FILE_CHUNK = 1 << 16  # bytes read (on a thread) and written at a time


async def send_file(
    request: web.Request, path: Path, headers: Mapping[str, str]
) -> web.StreamResponse:
    """The bytes of `path` as the answer, with its length; FileNotFoundError if it is gone.
    The file must not change while it is sent (the file store's are renamed into place whole).

    Its end is left to aiohttp, after the handler returns: a client that closes as soon as
    it has every byte (urllib does) would otherwise cut the handler short in `write_eof`, and
    the request's log line would read 499, as for a client that left."""
    file = await asyncio.to_thread(path.open, "rb")
    try:
        response = web.StreamResponse(headers=headers)
        left = response.content_length = os.fstat(file.fileno()).st_size
        await response.prepare(request)
        while left > 0 and request.method != "HEAD":
            chunk = await asyncio.to_thread(file.read, min(FILE_CHUNK, left))
            if not chunk:  # it shrank after all: cut the answer short, as a client that left
                raise ConnectionResetError(f"{path} shrank as it was sent")
            left -= len(chunk)
            await response.write(chunk)
        return response
    finally:
        file.close()
