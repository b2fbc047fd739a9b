"""What every batcher does with a sampled token, and how a step's output reaches its requests.

Shared by the GGUF scheduler and the ONNX batcher, so that both formats detokenize, stop, count
and stream alike: a client can tell them apart only by speed.
"""

from __future__ import annotations

import asyncio
import time

from localserve.backends.base import Vocabulary
from localserve.engine.sequence import Delta, Sequence

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
    return (text, True) if hit else (text + seq.stops.flush(), False)


def deliver(outbox: Outbox) -> None:
    """Hand a step's deltas to their event loops in one callback per loop, not one per token."""
    if not outbox:
        return
    by_loop: dict[asyncio.AbstractEventLoop, Outbox] = {}
    for seq, delta in outbox:
        by_loop.setdefault(seq.loop, []).append((seq, delta))
    for loop, items in by_loop.items():
        try:
            loop.call_soon_threadsafe(_put_all, items)
        except RuntimeError:  # the loop closed while the daemon shuts down
            pass


def _put_all(items: Outbox) -> None:
    for seq, delta in items:
        seq.outputs.put_nowait(delta)
