"""What a device loop steps and a resident model submits to: one batcher per loaded model.

The GGUF backend's batcher is the continuous `Scheduler`; a backend whose runtime batches
differently (onnxruntime-genai's static generator batches) brings its own, behind this surface.
"""

from __future__ import annotations

from typing import Callable, Protocol, Sized

from localserve.engine.sequence import Sequence


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
