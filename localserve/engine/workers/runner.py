"""What a resident model runs on: the seam between a request and the model's batcher.

A `ResidentModel` hands tokenizing, generating and embedding to its `Runner`. `RemoteRunner`
(engine/workers/remote.py) is the daemon's: the model lives in its device's engine worker, and every
call crosses the worker's socket. `LocalRunner` is a batcher in this process, as the unit tests
drive it (tests/fakes.py).
"""

from __future__ import annotations

import asyncio
from typing import Any, Protocol

import numpy as np

from localserve.backends.base import Vocabulary
from localserve.engine.batching.batcher import Batcher, Embedder
from localserve.engine.batching.embedding import EmbeddingJob
from localserve.engine.batching.outputs import LoopSink
from localserve.engine.batching.sequence import Sequence
from localserve.ground.errors import BadRequest
from localserve.ground.sampling import SamplingParams


class Runner(Protocol):
    """One loaded model's batcher, wherever it runs."""

    @property
    def n_vocab(self) -> int: ...

    @property
    def busy(self) -> int:
        """Requests running or waiting: what keeps the model from being idle."""
        ...

    def tokenize(self, texts: list[str], add_special: bool) -> list[list[int]]:
        """Texts to tokens, where the vocabulary lives (blocking: call off the event loop)."""
        ...

    async def start(
        self, prompt: list[int], params: SamplingParams, max_new: int, prompt_field: str
    ) -> Sequence:
        """Queue a generation; raises ContextOverflow or QueueFull before anything streams."""
        ...

    def cancel(self, seq: Sequence) -> None: ...

    async def embed(self, model: str, inputs: list[list[int]]) -> list[np.ndarray]:
        """One raw vector per input; a client that leaves frees the inputs' slots."""
        ...

    def stats(self) -> dict[str, Any]:
        """Queued and running sequences and the prompt cache's figures, for /api/ps."""
        ...


class LocalRunner:
    """A backend and its batcher in this process, stepped by a device loop of this process."""

    def __init__(self, vocab: Vocabulary, batcher: Batcher) -> None:
        self.vocab = vocab
        self.batcher = batcher

    @property
    def n_vocab(self) -> int:
        return self.vocab.n_vocab

    @property
    def busy(self) -> int:
        return self.batcher.busy

    def tokenize(self, texts: list[str], add_special: bool) -> list[list[int]]:
        return [self.vocab.tokenize(t, add_special) for t in texts]

    async def start(
        self, prompt: list[int], params: SamplingParams, max_new: int, prompt_field: str
    ) -> Sequence:
        seq = Sequence(prompt, params, max_new, LoopSink(asyncio.get_running_loop()))
        self.batcher.submit(seq, prompt_field)
        return seq

    def cancel(self, seq: Sequence) -> None:
        self.batcher.cancel(seq)

    async def embed(self, model: str, inputs: list[list[int]]) -> list[np.ndarray]:
        if not isinstance(self.batcher, Embedder):
            raise BadRequest(f"model '{model}' does not support embeddings", "model")
        job = EmbeddingJob(inputs, LoopSink(asyncio.get_running_loop()))
        self.batcher.submit_embedding(job)
        try:
            assert job.result is not None
            return await job.result
        finally:
            # A client that left frees its slots at the next embedding step; a no-op once done.
            self.batcher.cancel(job)

    def stats(self) -> dict[str, Any]:
        cache = getattr(self.batcher, "prompt_cache", None)
        return {
            "queued": len(self.batcher.waiting),
            "running": len(self.batcher.running),
            "prompt_cache": cache.stats() if cache is not None else None,
        }
