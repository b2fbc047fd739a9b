"""A generation's outputs as they come, the last one carrying its finish reason, and parsed
pieces joined into a whole answer. A stream that failed raises EngineError, whichever face
reads it (server/turn/local.py reads them through the answer parser)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

from localserve.engine.worker_client.stream import RequestStream
from localserve.ground import messages as m
from localserve.ground.errors import EngineError
from localserve.server.chat.answer_parser import Parsed


async def outputs(
    stream: RequestStream,
    idle_s: float | None = None,
) -> AsyncIterator[m.Output | None]:
    """The stream's outputs, ending with the one that carries its finish reason; None each
    time `idle_s` passes with nothing new (a stream's keep-alive)."""
    queue = stream.outputs
    while True:
        try:
            out = await asyncio.wait_for(queue.get(), idle_s) if idle_s else await queue.get()
        except asyncio.TimeoutError:
            yield None
            continue
        if out.error:
            raise EngineError(out.error)
        yield out
        if out.finish_reason is not None:
            return


def join(answer: Parsed, piece: Parsed) -> Parsed:
    return Parsed(
        answer.content + piece.content, answer.thinking + piece.thinking, answer.calls + piece.calls
    )
