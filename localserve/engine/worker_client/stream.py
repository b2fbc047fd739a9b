"""One generation as the daemon's faces read it: what the worker sent back of it, as it came.

The worker's `Sequence` (engine/batching/sequence.py) is the request itself: prompt, sampler,
slot, detokenizer. This is its other side of the socket: the outputs of each step (the
worker's `Output`s, as they arrived, in an asyncio queue), the tokens generated, the counts and
the times, and `timings()`, which the log line, the metrics and every face's usage read.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from dataclasses import dataclass

from localserve.ground import messages as m
from localserve.ground.sampling import SamplingParams

_ids = itertools.count(1)


@dataclass(frozen=True)
class Timings:
    """Seconds: queued before a slot, to the first token (prefill included), decoding after
    it, and in all; `per_token` is the decode time per token after the first."""

    queued_s: float
    ttft_s: float | None
    decode_s: float
    total_s: float
    per_token_s: float | None


class RequestStream:
    """A generation of one request, from its submit to its last output."""

    def __init__(self, params: SamplingParams) -> None:
        self.id = next(_ids)
        self.params = params
        # None: a keep-alive tick (server/chat/pieces.py), never from the worker.
        self.outputs: asyncio.Queue[m.Output | None] = asyncio.Queue()
        self.prompt: list[int] = []  # the prompt's tokens, where the daemon has them
        self.prompt_tokens = 0
        self.generated: list[int] = []
        self.cached_tokens = 0
        self.queued_s = 0.0
        self.created_at = time.monotonic()
        self.first_token_at: float | None = None
        self.finished_at: float | None = None
        self.finish_reason: str | None = None
        self.stop_sequence: str | None = None

    @property
    def completion_tokens(self) -> int:
        return len(self.generated)

    @property
    def finished(self) -> bool:
        return self.finish_reason is not None

    def took(self, out: m.Output, now: float) -> None:
        """Take one step's output: its tokens, the counts, and how it ended."""
        if out.tokens:
            self.first_token_at = self.first_token_at or now
            self.generated.extend(out.tokens)
        self.cached_tokens, self.queued_s = out.cached_tokens, out.queued_s
        if out.finish_reason is not None:
            self.finish_reason, self.stop_sequence = out.finish_reason, out.stop_sequence
            self.finished_at = now
        self.outputs.put_nowait(out)

    def end(self, reason: str, error: str | None = None) -> None:
        """End it here, with no word from the worker (the worker died, the client left)."""
        out = m.Output(0, "", [], reason, error, self.cached_tokens, self.queued_s)
        self.took(out, time.monotonic())

    def timings(self) -> Timings:
        end = self.finished_at or time.monotonic()
        first = self.first_token_at
        decode = end - first if first is not None else 0.0
        after_first = self.completion_tokens - 1
        return Timings(
            self.queued_s,
            first - self.created_at if first is not None else None,
            decode,
            end - self.created_at,
            decode / after_first if after_first > 0 else None,
        )
