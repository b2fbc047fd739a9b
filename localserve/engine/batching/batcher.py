"""What a device loop steps and a resident model submits to: one batcher per loaded model.

The GGUF backend's batcher is the continuous `Scheduler`; a backend whose runtime batches
differently (onnxruntime-genai's static generator batches) brings its own, behind this surface.
Every batcher admits through an `AdmissionQueue` (engine/batching/admission.py) and cancels alike.
"""

from __future__ import annotations

from collections.abc import Callable, Sized
from typing import Protocol, runtime_checkable

from localserve.engine.batching.admission import Cancellable
from localserve.engine.batching.embedding import EmbeddingJob
from localserve.engine.batching.outputs import StepResult
from localserve.engine.batching.sequence import Sequence


class Batcher(Protocol):
    @property
    def waiting(self) -> Sized:
        """Sequences queued, for /api/ps and the admin stats."""
        ...

    @property
    def running(self) -> Sized:
        """Sequences holding a slot, for /api/ps and the admin stats."""
        ...

    def attach(self, wake: Callable[[], None]) -> None:
        """Take the callable that wakes the device's engine loop."""
        ...

    def submit(self, seq: Sequence, prompt_field: str = "prompt") -> None:
        """Queue a sequence; raise ContextOverflow or QueueFull at once."""
        ...

    def cancel(self, request: Cancellable) -> None:
        """Cancel a sequence or an embeddings request and wake the engine loop: what of it
        waits leaves the queue now, what runs is freed at the engine's next step."""
        ...

    @property
    def busy(self) -> int:
        """Sequences running or waiting: what keeps the model from being idle."""
        ...

    def has_work(self) -> bool: ...

    def step(self) -> StepResult:
        """Run one unit of work on the engine thread; return what it produced."""
        ...


@runtime_checkable
class Embedder(Protocol):
    """A batcher that can embed. Optional: a batcher without it serves generation only."""

    def submit_embedding(self, job: EmbeddingJob) -> None:
        """Queue a job's inputs; raise ContextOverflow or QueueFull at once."""
        ...


@runtime_checkable
class Spiller(Protocol):
    """A batcher that keeps its conversations on disk while its model is unloaded
    (engine/batching/saved_conversations.py). Optional."""

    def save_conversations(self) -> int:
        """Write what the slots and the prompt cache hold, before the backend closes; returns
        how many conversations were written."""
        ...
