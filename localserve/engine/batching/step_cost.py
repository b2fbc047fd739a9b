"""What a step of one model costs, as measured: the price speculative decoding weighs its drafts
against (engine/batching/drafts.py).

llama.cpp runs a step as micro-batches. With one KV stream per slot it takes, from the lowest
slot with tokens left, the run of consecutive slots that have tokens left, and the same number
of tokens from each: as many as the shortest of them has (`llama_batch_allocr::split_equal`).
Each micro-batch is a pass over the weights. So 12 slots decoding one token each, with slot 3
drafting 2 more, run as two micro-batches (12 tokens, then 2); with slots 0, 3, 6 and 9 drafting
2 each, as five. A drafted token thus costs more than a decode token wherever it starts a
micro-batch of its own, and most where few sequences draft, or draft different lengths, in slots
far apart.

A micro-batch costs a fixed part plus a part per token, except a lone token: one row turns the
matrix products into matrix-vector ones, cheaper than the fixed part plus a token. Measured for
SmolLM2 on 2 cores, 700 tokens into each slot: 10 ms for a lone token, 18.5 ms for 2 tokens of
one slot and 58 ms for 9; 73 ms for 12 slots' decode tokens, 134 ms with one of them drafting 8,
and 163 ms with four slots 3 apart drafting 2 each (8 drafts either way). A cost linear in a
step's tokens put both at 132 ms.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from localserve.ground.step import StepPlan

# Steps longer than this are not fitted: long prefill chunks add attention costs of their own.
FIT_MAX_TOKENS = 80
# How much of its past the fit keeps per step: recent steps weigh most, as contexts grow.
FIT_MEMORY = 0.98
# The shape assumed until steps tell otherwise: a micro-batch's fixed part is 2 tokens' worth
# and a lone token costs the fixed part and one token. It weighs as much as PRIOR_WEIGHT steps.
PRIOR_FIXED_TOKENS = 2.0
PRIOR_WEIGHT = 0.1


def micro_batches(tokens_by_slot: Iterable[int]) -> list[int]:
    """The sizes, in tokens, of the micro-batches llama.cpp runs a step in, given each slot's
    tokens in the step in slot order (0 for a slot not in it).

    Taking the leftmost run's shortest height again and again cuts the slots' heights into
    the same blocks as the skyline's standard decomposition, so one pass with a stack finds them.
    """
    sizes: list[int] = []
    stack: list[tuple[int, int]] = []  # (height, first slot) of the blocks still open
    heights = [*tokens_by_slot, 0]
    for i, h in enumerate(heights):
        start = i
        while stack and stack[-1][0] > h:
            top, start = stack.pop()
            below = max(h, stack[-1][0] if stack else 0)
            sizes.append((i - start) * (top - below))
        if h > 0 and (not stack or stack[-1][0] < h):
            stack.append((h, start))
    return sizes


def tokens_by_slot(plan: StepPlan) -> list[int]:
    """Each slot's tokens in `plan`, in slot order, 0 for the slots it leaves out."""
    if not plan.chunks:
        return []
    tokens = [0] * (max(c.slot for c in plan.chunks) + 1)
    for chunk in plan.chunks:
        tokens[chunk.slot] += len(chunk.tokens)
    return tokens


def _features(sizes: list[int]) -> np.ndarray:
    """(micro-batches of 2 or more tokens, their tokens, lone tokens) of a step."""
    many = [s for s in sizes if s > 1]
    return np.array([len(many), sum(many), len(sizes) - len(many)], dtype=np.float64)


class StepCost:
    """A step's time as the sum of its micro-batches' (a fixed part plus a part per token, or
    a lone token's own cost), fitted by least squares on the steps run so far, recent ones
    weighing most, and pulled gently toward the prior shape where the steps seen cannot tell
    the parts apart (a single stream that never drafted has run only lone tokens)."""

    def __init__(self) -> None:
        self._xx = np.zeros((3, 3))
        self._xt = np.zeros(3)
        self._steps = 0.0
        self._fit: tuple[float, float, float] | None = None

    def record(self, plan: StepPlan, seconds: float) -> None:
        sizes = micro_batches(tokens_by_slot(plan))
        if not sizes or sum(sizes) > FIT_MAX_TOKENS:
            return
        x = _features(sizes)
        self._xx = FIT_MEMORY * self._xx + np.outer(x, x)
        self._xt = FIT_MEMORY * self._xt + x * seconds
        self._steps = FIT_MEMORY * self._steps + 1
        self._fit = None

    def _parts(self) -> tuple[float, float, float]:
        """(fixed part, per token, lone token) in seconds; (fixed tokens, 1, fixed + 1) in
        tokens' worth before any step was measured."""
        if self._fit is None:
            self._fit = self._solve()
        return self._fit

    def _solve(self) -> tuple[float, float, float]:
        prior = (PRIOR_FIXED_TOKENS, 1.0, PRIOR_FIXED_TOKENS + 1)
        if not self._steps:
            return prior
        # The prior as two equations the parts should meet: fixed = F x token, lone = fixed + token.
        shape = np.array([[1.0, -PRIOR_FIXED_TOKENS, 0.0], [1.0, 1.0, -1.0]])
        try:
            fixed, token, lone = np.linalg.solve(
                self._xx + PRIOR_WEIGHT * shape.T @ shape, self._xt
            )
        except np.linalg.LinAlgError:
            return prior
        if token <= 0:  # more tokens cost nothing measurable: the fixed part is everything
            lone = max(lone, 1e-6)
            return (lone, lone / 64, lone)
        return (max(fixed, 0.0), token, max(lone, 0.05 * token))

    @property
    def token_seconds(self) -> float | None:
        """What a token's worth of a step costs in seconds; None before a step was measured."""
        return self._parts()[1] if self._steps else None

    @property
    def lone_tokens(self) -> float:
        """A step of one lone token, in tokens' worth."""
        _, token, lone = self._parts()
        return lone / token

    def units(self, tokens_by_slot: Iterable[int]) -> float:
        """A step's cost in tokens' worth, given each slot's tokens in slot order."""
        fixed, token, lone = self._parts()
        return sum(
            lone / token if size == 1 else fixed / token + size
            for size in micro_batches(tokens_by_slot)
        )
