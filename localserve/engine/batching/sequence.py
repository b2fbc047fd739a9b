"""One request's state as it moves through the batcher, inside the engine worker: plain data
that the batcher steps. What a step produced for it comes back in the step's result
(engine/batching/outputs.py); the daemon's side of it is a `RequestStream`."""

from __future__ import annotations

import itertools
import time
from dataclasses import dataclass
from enum import Enum

from localserve.engine.batching.detokenizer import IncrementalDetokenizer
from localserve.engine.batching.drafts import Drafter
from localserve.engine.batching.stops import StopMatcher
from localserve.ground.sampling import SamplingParams

_ids = itertools.count(1)


class Status(Enum):
    WAITING = "waiting"
    RUNNING = "running"
    FINISHED = "finished"


@dataclass(frozen=True)
class Delta:
    """A piece of a sequence's output, as one step produced it."""

    text: str
    finish_reason: str | None = None
    error: str | None = None


class Sequence:
    """A prompt, its sampling rules, and everything generated so far.

    The engine thread steps it; the worker's main thread only submits and cancels it, through
    its batcher (engine/batching/admission.py).
    """

    def __init__(self, prompt: list[int], params: SamplingParams, max_new_tokens: int) -> None:
        self.id = next(_ids)
        self.prompt = prompt
        # What the slot must hold before the next token is sampled: the prompt, and after a
        # preemption also what was generated before it (its first `resumed_at` tokens).
        self.context = prompt
        self.resumed_at = 0
        self.params = params
        self.max_new_tokens = max_new_tokens
        self.status = Status.WAITING
        self.slot: int | None = None
        self.n_prefilled = 0
        # Prompt tokens whose KV was already in the slot from an earlier sequence.
        self.cached_tokens = 0
        # Steps this prompt's prefill was put off so that shorter ones could sample first.
        self.prefill_deferrals = 0
        # Whether its prompt needed little prefill when it waited for a slot, and how often a
        # quicker request took a free slot before it (priorities.quick_first).
        self.quick: bool | None = None
        self.passed_over = 0
        self.generated: list[int] = []
        # How many of `generated` a worker has sent to the daemon so far.
        self.reported = 0
        self.finish_reason: str | None = None
        # The stop string that ended it (finish reason "stop"), as Anthropic's answers name it.
        self.stop_sequence: str | None = None
        # Set by the batcher's cancel; the engine thread frees what the sequence holds.
        self.cancelled = False
        self.created_at = time.monotonic()
        self.queued_s = 0.0  # from queueing to a slot
        self.first_token_at: float | None = None
        self.finished_at: float | None = None
        self.detokenizer = IncrementalDetokenizer()
        # Its prompt-lookup index, made at its first draft (engine/batching/drafts.py).
        self.drafter: Drafter | None = None
        self.stops = StopMatcher(params.stop)

    @property
    def prompt_tokens(self) -> int:
        return len(self.prompt)

    @property
    def completion_tokens(self) -> int:
        return len(self.generated)

    @property
    def position(self) -> int:
        """Where the next token goes in this sequence's KV range."""
        return self.n_prefilled + max(0, len(self.generated) - self.resumed_at - 1)

    @property
    def prefill_done(self) -> bool:
        return self.n_prefilled >= len(self.context)

    @property
    def to_prefill(self) -> int:
        return len(self.context) - self.n_prefilled

    @property
    def held(self) -> list[int]:
        """The tokens whose cells its slot holds (the last sampled token has not run yet)."""
        decoded = self.generated[self.resumed_at : -1] if self.prefill_done else []
        return self.context[: self.n_prefilled] + decoded

    def preempt(self) -> None:
        """Back to waiting, keeping what it generated: it resumes by prefilling its context,
        now holding those tokens too, most of it restored from the prompt cache."""
        if self.prefill_done:
            self.context = self.prompt + self.generated
            self.resumed_at = len(self.generated)
        self.slot = None
        self.n_prefilled = 0
        self.status = Status.WAITING

    def mark_cancelled(self) -> None:
        """End a cancelled sequence, whose client has left: nothing more is delivered."""
        self.status = Status.FINISHED
        self.finish_reason = "cancelled"
