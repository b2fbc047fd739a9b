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
    # A ticker puts the keep-alives in the queue: asyncio.wait_for around each get would
    # make a task per token, and on a small machine the daemon's CPU per token is taken from
    # the decode's cores.
    ticker = _Ticker(queue, idle_s) if idle_s else None
    try:
        while True:
            out = await queue.get()
            if out is None:
                yield None
                continue
            if ticker is not None:
                ticker.heard = True
            if out.error:
                raise EngineError(out.error)
            yield out
            if out.finish_reason is not None:
                return
    finally:
        if ticker is not None:
            ticker.handle.cancel()


class _Ticker:
    """Every `idle_s`, a None in the queue unless an output came since the last tick or one
    waits there (a reader slower than its stream needs no keep-alive)."""

    def __init__(self, queue: asyncio.Queue[m.Output | None], idle_s: float) -> None:
        self.queue, self.idle_s, self.heard = queue, idle_s, False
        self.loop = asyncio.get_running_loop()
        self.handle = self.loop.call_later(idle_s, self.tick)

    def tick(self) -> None:
        if not self.heard and self.queue.empty():
            self.queue.put_nowait(None)
        self.heard = False
        self.handle = self.loop.call_later(self.idle_s, self.tick)


def join(answer: Parsed, piece: Parsed) -> Parsed:
    return Parsed(
        answer.content + piece.content, answer.thinking + piece.thinking, answer.calls + piece.calls
    )
