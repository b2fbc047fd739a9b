"""While a prompt prefills, a stream's reader is woken every `idle_s` with nothing new, so each
face can write its keep-alive (an SSE comment, Anthropic's ping) before the first token; the
live faces are in tests/live/test_stream_keepalives.py."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

from localserve.ground import messages as m
from localserve.server.chat.pieces import outputs

IDLE_S = 0.05


async def read(first_after_s: float) -> list[m.Output | None]:
    queue: asyncio.Queue[m.Output] = asyncio.Queue()
    stream: Any = SimpleNamespace(outputs=queue)

    async def prefill_then_answer() -> None:
        await asyncio.sleep(first_after_s)
        queue.put_nowait(m.Output(0, "Hi", [1]))
        queue.put_nowait(m.Output(0, "!", [2], finish_reason="stop"))

    task = asyncio.create_task(prefill_then_answer())
    seen = [out async for out in outputs(stream, IDLE_S)]
    await task
    return seen


def test_a_slow_prefill_wakes_the_reader_with_keepalives_before_the_first_token() -> None:
    seen = asyncio.run(read(first_after_s=10 * IDLE_S))
    first = next(i for i, out in enumerate(seen) if out is not None)
    assert first >= 2 and all(out is None for out in seen[:first])
    assert [out.text for out in seen[first:] if out is not None] == ["Hi", "!"]


def test_without_idle_s_the_reader_waits_silently() -> None:
    async def silent() -> list[m.Output | None]:
        queue: asyncio.Queue[m.Output] = asyncio.Queue()
        queue.put_nowait(m.Output(0, "Hi", [1], finish_reason="stop"))
        return [out async for out in outputs(SimpleNamespace(outputs=queue))]  # type: ignore[arg-type]

    assert [out.text for out in asyncio.run(silent()) if out is not None] == ["Hi"]
