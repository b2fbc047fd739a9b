"""The protocol every backend implements, and the plan the scheduler hands it each step.

A backend knows kernels, KV slots and memory sizes. It knows nothing of HTTP, queues or other
models: the scheduler decides what runs in a step, the backend only runs it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

import numpy as np

from localserve.engine.sampling import SamplingParams


@dataclass
class StepChunk:
    """Tokens of one sequence to run in this step.

    `sample` asks for a token to be drawn after the last one: true for a decode token and for
    the final chunk of a prompt, false for a prefill chunk that leaves more prompt to go.
    """

    slot: int
    tokens: list[int]
    start_pos: int
    sample: bool


@dataclass
class StepPlan:
    """Everything one forward pass of one model does: decode tokens first, then prefill chunks."""

    chunks: list[StepChunk] = field(default_factory=list)

    @property
    def n_tokens(self) -> int:
        return sum(len(c.tokens) for c in self.chunks)


@dataclass(frozen=True)
class ModelInfo:
    """What the engine and the API faces need to know about a loaded model."""

    name: str
    path: str
    format: str
    n_slots: int
    n_ctx_slot: int
    n_ctx_train: int
    size_bytes: int
    chat_template: str | None
    bos_text: str
    eos_text: str
    add_bos: bool
    architecture: str = "unknown"
    quantization: str = "unknown"
    n_params: int = 0
    n_embd: int = 0


class Backend(Protocol):
    """A loaded model on one device, with `n_slots` KV slots allocated at load."""

    info: ModelInfo

    def tokenize(self, text: str, add_special: bool) -> list[int]:
        """Text to tokens; special tokens written in the text are parsed as such."""
        ...

    def token_piece(self, token: int) -> bytes:
        """The bytes one token stands for (possibly half a UTF-8 character)."""
        ...

    def is_end_of_generation(self, token: int) -> bool: ...

    @property
    def n_vocab(self) -> int:
        """Token ids run from 0 to n_vocab - 1."""
        ...

    def seq_start(self, slot: int, params: SamplingParams, prompt: list[int]) -> None:
        """Give a slot a fresh sampler for a new sequence; its KV cells are left as they are."""
        ...

    def seq_end(self, slot: int) -> None:
        """Free the slot's sampler. Its KV cells stay, so a later prompt can reuse the prefix."""
        ...

    def seq_trim(self, slot: int, keep: int) -> bool:
        """Forget the slot's KV cells from position `keep` on; False if the runtime cannot."""
        ...

    def step(self, plan: StepPlan) -> list[int]:
        """Run one forward pass; return one sampled token per chunk with `sample` set, in order."""
        ...

    def close(self) -> None:
        """Free every native resource; the backend is unusable afterwards."""
        ...


@runtime_checkable
class EmbeddingBackend(Protocol):
    """A backend that can also return hidden states, one row per token, for embeddings.

    Optional: a backend without `embed` serves generation only, and its models answer an
    embeddings request with a clear 400.
    """

    # How the model pools a sequence's rows into one vector: "mean", "cls" or "last".
    pooling: str

    def embed(self, plan: StepPlan) -> np.ndarray:
        """Run one forward pass in embeddings mode over every token of the plan's chunks.

        Returns one row of hidden states per token, in plan order (n_tokens x n_embd). The
        chunks' KV cells are written as in a prefill, so a chunk may continue an earlier one.
        """
        ...
