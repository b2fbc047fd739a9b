"""What a device loop steps and a resident model submits to: one batcher per loaded model.

The GGUF backend's batcher is the continuous `Scheduler`; a backend whose runtime batches
differently (onnxruntime-genai's static generator batches) brings its own, behind this surface.
"""

from __future__ import annotations

import threading
from collections import deque
from typing import Callable, Protocol, Sized

from localserve.backends.base import ModelInfo
from localserve.engine.errors import ContextOverflow, QueueFull
from localserve.engine.sequence import Sequence


def enqueue(
    waiting: deque[Sequence], lock: threading.Lock, seq: Sequence, limit: int,
    info: ModelInfo, prompt_field: str,
) -> None:
    """The admission rule every batcher shares: refuse at once a prompt that can never fit a
    slot, and a request that would wait past the queue's bound; otherwise queue it."""
    if seq.prompt_tokens >= info.n_ctx_slot:
        raise ContextOverflow(seq.prompt_tokens, info.n_ctx_slot, prompt_field)
    with lock:
        if len(waiting) >= limit:
            raise QueueFull(info.name, limit)
        waiting.append(seq)


class Batcher(Protocol):
    # Sequences queued and sequences holding a slot, for /api/ps and the admin stats.
    waiting: Sized
    running: Sized

    def attach(self, wake: Callable[[], None]) -> None:
        """Take the callable that wakes the device's engine loop."""
        ...

    def submit(self, seq: Sequence, prompt_field: str = "prompt") -> None:
        """Queue a sequence; raise ContextOverflow or QueueFull at once."""
        ...

    def cancel(self, seq: Sequence) -> None: ...

    @property
    def busy(self) -> int:
        """Sequences running or waiting: what keeps the model from being idle."""
        ...

    def has_work(self) -> bool: ...

    def step(self) -> None:
        """Run one unit of work on the engine thread and deliver what it produced."""
        ...
