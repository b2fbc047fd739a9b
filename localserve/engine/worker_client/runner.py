"""What a resident model runs on: the seam between a request and the model's batcher.

A `ResidentModel` hands tokenizing, generating and embedding to its `Runner`. `RemoteRunner`
(engine/worker_client/remote.py) is the daemon's: the model lives in its device's engine worker, and
every call crosses the worker's socket. The unit tests' runner runs a batcher in their own
process (tests/support/fakes.py).
"""

from __future__ import annotations

from typing import Any, Protocol

import numpy as np

from localserve.engine.worker_client.stream import RequestStream
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
        self,
        prompt: list[int] | str,
        params: SamplingParams,
        prompt_field: str,
        add_special: bool = False,
        want_tokens: bool = False,
    ) -> RequestStream:
        """Queue a generation of a prompt's tokens, or of its text (tokenized where the
        vocabulary lives, with the model's BOS when `add_special`); raises BadRequest for an
        empty prompt, ContextOverflow or QueueFull before anything streams. `params.max_tokens`
        is the answer's cap (None: what the slot's context leaves)."""
        ...

    def cancel(self, stream: RequestStream) -> None: ...

    async def embed(
        self, model: str, inputs: list[list[int]], background: bool = False
    ) -> list[np.ndarray]:
        """One raw vector per input; a client that leaves frees the inputs' slots. Background
        inputs wait while interactive generations run (engine/batching/priorities.py)."""
        ...

    def stats(self) -> dict[str, Any]:
        """Queued and running sequences and the prompt cache's figures, for /api/ps."""
        ...
