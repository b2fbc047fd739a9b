"""A generation's answer as every face reads it: the stream's outputs as they come, through the
answer parser (thinking, content, calls), the last piece once the stream finishes; or the whole
answer at once. A stream that failed raises EngineError, whichever face reads it."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

from localserve.engine.worker_client.stream import RequestStream
from localserve.ground import messages as m
from localserve.ground.errors import EngineError
from localserve.server.chat.answer_parser import AnswerParser, Parsed


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


async def parsed(
    stream: RequestStream,
    parser: AnswerParser,
    idle_s: float | None = None,
) -> AsyncIterator[Parsed | None]:
    """The answer's parsed pieces as they stream (None: `idle_s` passed)."""
    async for out in outputs(stream, idle_s):
        if out is None:
            yield None
        else:
            yield parser.feed(out.text, final=out.finish_reason is not None)


async def whole(stream: RequestStream, parser: AnswerParser) -> Parsed:
    """The whole answer, once the stream is done."""
    answer = Parsed()
    async for piece in parsed(stream, parser):
        if piece is not None:
            answer = join(answer, piece)
    return answer


def join(answer: Parsed, piece: Parsed) -> Parsed:
    return Parsed(
        answer.content + piece.content, answer.thinking + piece.thinking, answer.calls + piece.calls
    )
