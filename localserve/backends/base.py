"""What a backend is to the engine: a vocabulary, and one of two ways of running a batch.

A backend knows kernels, KV cells and memory sizes. It knows nothing of HTTP, queues or other
models. There are two kinds, after who decides what runs in a step:

- a `SlotBackend` (llama.cpp) runs exactly the `StepPlan` the engine's scheduler hands it, over
  KV slots allocated at load; `EmbeddingBackend` and `SlotStates` (engine/batching/slots.py) are
  capabilities it may add;
- a `BatchRuntime` (onnxruntime-genai) batches requests itself: the engine's batcher starts,
  steps and ends its requests' turns, and reads back `TurnEvent`s of our own making, so that
  no runtime's types reach the engine.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Protocol, runtime_checkable

import numpy as np

from localserve.ground.model import ModelInfo
from localserve.ground.sampling import SamplingParams
from localserve.ground.step import StepPlan


class Vocabulary(Protocol):
    """A loaded model's tokens: text to ids and back, and its facts (`info` carries the chat
    template and the special tokens' text)."""

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


class Backend(Vocabulary, Protocol):
    """A loaded model of either kind, as the loader and a resident model hold it."""

    def close(self) -> None:
        """Free every native resource; the backend is unusable afterwards."""
        ...

    def check_sampling(self, p: SamplingParams) -> None:
        """BadRequest naming the field of `p` this model's sampler cannot honour (a grammar it
        cannot enforce, a sampler it lacks), before anything is queued: never an answer that
        silently leaves it out."""
        ...


class SlotBackend(Backend, Protocol):
    """A model whose steps the engine plans, with `info.n_slots` KV slots allocated at load."""

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


@runtime_checkable
class EmbeddingBackend(Protocol):
    """A slot backend that can also return hidden states, one row per token, for embeddings.

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


class TurnEnd(Enum):
    """Why a runtime ended a request's turn by itself."""

    EOS = "eos"  # the model emitted an end-of-generation token (not itself reported)
    LENGTH = "length"  # the turn reached its max_new tokens
    FAILED = "failed"


@dataclass(frozen=True)
class TurnEvent:
    """What one runtime step did to one request: a new token, an end, or both."""

    key: int  # the key the batcher began the request with
    token: int | None = None
    end: TurnEnd | None = None


class BatchRuntime(Backend, Protocol):
    """A model whose runtime batches its requests itself (onnxruntime-genai's Engine).

    Requests are named by a key of the batcher's choosing. The engine a runtime steps must be
    used from the thread that made it: the batcher calls `new_engine` on its engine thread.
    """

    # The most requests one batch holds.
    max_batch_size: int
    # True when requests may join a running batch at its next step (a paged KV cache, or our own
    # KV rows on the CPU); false for static batches, which run until their last request ends.
    continuous: bool
    # The model's end-of-generation tokens; a turn that ends with TurnEnd.EOS emitted one.
    eos_ids: frozenset[int]

    def new_engine(self) -> None:
        """Start a fresh engine on the calling thread; the previous one's requests are gone."""
        ...

    def begin(self, key: int, tokens: list[int], params: SamplingParams, max_new: int) -> None:
        """Add a request under `key`, sampled its own way, to generate at most `max_new`."""
        ...

    def run(self) -> list[TurnEvent]:
        """Run one step of the engine's batch."""
        ...

    def release(self, key: int, cancel: bool) -> None:
        """Let go of a request; `cancel` first stops its turn, when the runtime still runs it.

        In a static batch its row runs on as padding until the batch ends.
        """
        ...
