"""One embeddings request as the engine sees it: its inputs, their pooling, and its answer.

Each input is one text's tokens and becomes one vector. The inputs of a request, and of every
concurrent request, run as sequences in the model's own batcher
(`engine/batching/embedding_lane.py`), so they share decode calls with each other. A job is
done in the step that pools its last input, and that step's result carries it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


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

    @property
    def prompt_tokens(self) -> int:
        return len(self.tokens)

    @property
    def cancelled(self) -> bool:
        """Its request's flag: cancelling a request cancels every input of it."""
        return self.job.cancelled

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
    """All the inputs of one request; `vectors` gets one raw (unnormalized) vector per input."""

    inputs_tokens: list[list[int]]
    vectors: list[np.ndarray | None] = field(init=False)
    # Set by the batcher's cancel (the client left); the engine thread frees the inputs' slots.
    cancelled: bool = False
    # The daemon's name for the job, across a worker's socket.
    id: int = 0
    # Background jobs (batches) take no turn while interactive generations run or wait.
    background: bool = False

    def __post_init__(self) -> None:
        self.vectors = [None] * len(self.inputs_tokens)

    @property
    def prompt_tokens(self) -> int:
        return sum(len(t) for t in self.inputs_tokens)

    def inputs(self) -> list[EmbeddingInput]:
        return [EmbeddingInput(self, i, t) for i, t in enumerate(self.inputs_tokens)]

    @property
    def complete(self) -> bool:
        return all(v is not None for v in self.vectors)
