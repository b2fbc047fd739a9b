"""What every batcher does with a sampled token, and what a step returns.

Shared by the GGUF scheduler and the ONNX batcher, so that both formats detokenize, stop, count
and stream alike: a client can tell them apart only by speed. A step returns its `StepResult`:
each sequence's new text (and how it ended) and the embeddings jobs it completed; the worker
sends it to the daemon as one message.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

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


@dataclass
class StepResult:
    """What one step of a batcher produced, in order."""

    outputs: Outbox = field(default_factory=list)
    # Jobs whose vectors are all in `job.vectors`, or that failed with the error.
    embedded: list[tuple[EmbeddingJob, Exception | None]] = field(default_factory=list)
