"""The step contract: what the batcher asks of a backend in one forward pass of one model.

Prefill and decode are one thing here: a chunk of a sequence's tokens, as many as its prompt
has left or one.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class StepChunk:
    """Tokens of one sequence to run in this step.

    `sample` asks for a token to be drawn after the last one: true for a decode token and for
    the final chunk of a prompt, false for a prefill chunk that leaves more prompt to go.
    `drafts` are the last tokens of a decode chunk that are only guesses
    (engine/batching/drafts.py): a token is drawn after each of them too, to verify them.
    """

    slot: int
    tokens: list[int]
    start_pos: int
    sample: bool
    drafts: int = 0


@dataclass
class StepPlan:
    """Everything one forward pass of one model does: decode tokens first, then prefill chunks."""

    chunks: list[StepChunk] = field(default_factory=list)

    @property
    def n_tokens(self) -> int:
        return sum(len(c.tokens) for c in self.chunks)
