"""What every batcher does with a sampled token, and how a step's output reaches its requests.

Shared by the GGUF scheduler and the ONNX batcher, so that both formats detokenize, stop, count
and stream alike: a client can tell them apart only by speed.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

import numpy as np

from localserve.backends.base import Vocabulary
from localserve.engine.batching.sequence import Delta, Sequence

if TYPE_CHECKING:
    from localserve.engine.batching.embedding import EmbeddingJob

Outbox = list[tuple[Sequence, Delta]]


def accept_token(
    seq: Sequence, token: int, vocab: Vocabulary, now: float
) -> tuple[str, str | None]:
    """Take one sampled token: detokenize it and check the stopping rules.

    Returns the text the sequence may emit now and, when the token ends it, the finish reason
    (its text then includes everything held back).
    """
    if seq.first_token_at is None:
        seq.first_token_at = now
    seq.generated.append(token)
    if not seq.params.ignore_eos and vocab.is_end_of_generation(token):
        return drain(seq)[0], "stop"
    text, hit = seq.stops.feed(seq.detokenizer.feed(vocab.token_piece(token)))
    if hit:
        seq.stop_sequence = seq.stops.hit
        return text, "stop"
    if len(seq.generated) >= seq.max_new_tokens or seq.position + 1 >= vocab.info.n_ctx_slot:
        tail, hit = drain(seq)
        return text + tail, "stop" if hit else "length"
    return text, None


def end_sequence(
    seq: Sequence, reason: str, outbox: Outbox, text: str = "", error: str | None = None
) -> None:
    """Mark a sequence finished and queue its last delta (the one with the finish reason)."""
    seq.finish_reason = reason
    seq.finished_at = time.monotonic()
    outbox.append((seq, Delta(text, finish_reason=reason, error=error)))


def drain(seq: Sequence) -> tuple[str, bool]:
    """Everything still held by the detokenizer and the stop matcher, once a sequence ends."""
    text, hit = seq.stops.feed(seq.detokenizer.flush())
    if hit:
        seq.stop_sequence = seq.stops.hit
        return text, True
    return text + seq.stops.flush(), False


class Sink(Protocol):
    """Where a step's output goes: the requests' event loop in this process (`LoopSink`), or
    the daemon on the far side of a worker's socket. Called from the engine thread."""

    def put(self, items: Outbox) -> None:
        """A step's deltas, one call per step."""
        ...

    def embedded(self, job: EmbeddingJob, error: Exception | None) -> None:
        """An embeddings job is done (its vectors are in `job.vectors`) or failed."""
        ...

    def future(self) -> asyncio.Future[list[np.ndarray]] | None:
        """What an embeddings job's waiter awaits, where the waiter is in this process."""
        ...


class LoopSink:
    """Deltas and vectors handed to an event loop of this process, one callback per step."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop

    def put(self, items: Outbox) -> None:
        self._call(_put_all, items)

    def embedded(self, job: EmbeddingJob, error: Exception | None) -> None:
        self._call(_settle, job, error)

    def future(self) -> asyncio.Future[list[np.ndarray]]:
        return self.loop.create_future()

    def _call(self, callback: Callable[..., None], *args: object) -> None:
        try:
            self.loop.call_soon_threadsafe(callback, *args)
        except RuntimeError:  # the loop closed while the daemon shuts down
            pass


def deliver(outbox: Outbox) -> None:
    """Hand a step's deltas to their sinks in one call per sink, not one per token."""
    if not outbox:
        return
    by_sink: dict[int, tuple[Sink, Outbox]] = {}
    for seq, delta in outbox:
        by_sink.setdefault(id(seq.sink), (seq.sink, []))[1].append((seq, delta))
    for sink, items in by_sink.values():
        sink.put(items)


def _put_all(items: Outbox) -> None:
    for seq, delta in items:
        seq.outputs.put_nowait(delta)


def _settle(job: EmbeddingJob, error: Exception | None) -> None:
    result = job.result
    if result is None or result.done():
        return
    if error is None:
        result.set_result([v for v in job.vectors if v is not None])
    else:
        result.set_exception(error)
