"""One embeddings request as the engine sees it: its inputs, their pooling, and its answer.

Each input is one text's tokens and becomes one vector. The inputs of a request, and of every
concurrent request, run as sequences in the model's own batcher (`engine/embedding_lane.py`),
so they share decode calls with each other. A request's answer is one future, resolved on its
event loop when its last input is pooled.
"""

from __future__ import annotations

import asyncio
import math
from dataclasses import dataclass, field

import numpy as np

# llama.cpp keeps a row of logits for every output token, even in embeddings mode, and an
# embedding step outputs every token: its output buffer grows to rows x (vocab + width) floats
# and stays. Bounding the rows of an embedding step bounds that buffer; the estimate reserves it.
# 16 MiB keeps the estimate within a few percent of a small model's (84 rows for SmolLM2's
# 49k vocabulary, 16 for Gemma's 262k); a longer input simply takes more steps.
EMBED_OUTPUT_BYTES = 16 << 20
F32 = 4


def embedding_rows(n_vocab: int, n_embd: int, n_slots: int, step_tokens: int) -> int:
    """Tokens one embedding step may carry: as many as step_tokens, within EMBED_OUTPUT_BYTES."""
    per_row = max(1, (n_vocab + n_embd) * F32)
    return max(n_slots, min(step_tokens, EMBED_OUTPUT_BYTES // per_row))


def embedding_output_bytes(n_vocab: int, n_embd: int, n_slots: int, step_tokens: int) -> int:
    """The output buffer an embedding step leaves behind, for the memory estimate."""
    rows = embedding_rows(n_vocab, n_embd, n_slots, step_tokens)
    return rows * (n_vocab + n_embd) * F32


@dataclass(eq=False)
class EmbeddingInput:
    """One text of a request, running through the batcher like a sequence without sampling."""

    job: EmbeddingJob
    index: int
    tokens: list[int]
    slot: int | None = None
    n_done: int = 0
    # Pooling state: a running sum for "mean", the chosen row for "cls" and "last".
    acc: np.ndarray | None = None

    @property
    def remaining(self) -> int:
        return len(self.tokens) - self.n_done

    def take(self, rows: np.ndarray, pooling: str) -> None:
        """Fold this step's hidden-state rows (one per token just run) into the pooled state."""
        if pooling == "mean":
            total = rows.sum(axis=0, dtype=np.float64)
            self.acc = total if self.acc is None else self.acc + total
        elif pooling == "cls":
            if self.n_done == 0:
                self.acc = rows[0].astype(np.float64)
        else:  # "last": the final token's row, once the input is complete
            self.acc = rows[-1].astype(np.float64)
        self.n_done += len(rows)

    def vector(self, pooling: str) -> np.ndarray:
        assert self.acc is not None
        vec = self.acc / len(self.tokens) if pooling == "mean" else self.acc
        return vec.astype(np.float32)


@dataclass(eq=False)
class EmbeddingJob:
    """All the inputs of one request; `result` gets one raw (unnormalized) vector per input."""

    inputs_tokens: list[list[int]]
    loop: asyncio.AbstractEventLoop
    result: asyncio.Future[list[np.ndarray]] = field(init=False)
    vectors: list[np.ndarray | None] = field(init=False)
    cancelled: bool = False

    def __post_init__(self) -> None:
        self.result = self.loop.create_future()
        self.vectors = [None] * len(self.inputs_tokens)

    @property
    def prompt_tokens(self) -> int:
        return sum(len(t) for t in self.inputs_tokens)

    def inputs(self) -> list[EmbeddingInput]:
        return [EmbeddingInput(self, i, t) for i, t in enumerate(self.inputs_tokens)]

    @property
    def complete(self) -> bool:
        return all(v is not None for v in self.vectors)

    def cancel(self) -> None:
        self.cancelled = True


def normalize(vec: np.ndarray) -> np.ndarray:
    """Unit length (L2), as Ollama's /api/embed and OpenAI return; a zero vector stays zero."""
    norm = float(np.linalg.norm(vec))
    return vec / norm if norm > 0 and math.isfinite(norm) else vec


def shorten(vec: np.ndarray, dimensions: int | None) -> np.ndarray:
    """The first `dimensions` components, renormalized, as `dimensions` asks of both faces."""
    if dimensions is None or dimensions >= len(vec):
        return vec
    return normalize(vec[:dimensions])
