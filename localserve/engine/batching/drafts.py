"""Speculative decoding by prompt lookup: draft tokens a sequence will likely write next, by
finding its last few tokens earlier in its prompt or its output, and proposing what followed.

Editor and agent traffic repeats text: a function returned with one name changed, a file echoed
with a fix, an answer quoting its context. There the drafts are often right. The scheduler runs
a sequence's drafts after its decode token, keeps the longest prefix the model itself would have
written (its greedy choice at each drafted position), and trims the cells of the rest
(llama.cpp's `--spec-type ngram`, vLLM's `[ngram]`).

Whether drafting pays depends on the machine. A step costs a fixed part (a pass over the
weights) plus a part per token; where the fixed part dominates (a GPU, a large model in slow
memory) verifying eight tokens costs little more than decoding one, but on a few CPU cores
with a small model each token costs most of a step (SmolLM2 on 2 cores: 14 ms for one token,
66 ms for eight). So the scheduler measures its own steps (`StepCost`) and each sequence's
acceptance (`Drafter.acceptance`), and drafts only the tokens whose expected gain beats their
cost in tokens per second across the whole step (`plan_drafts`): a batch already full of
decode tokens gets no drafts, and a sequence whose drafts keep failing stops drafting until
its estimate recovers. A draft model's tokens (engine/batching/draft_model.py) are weighed by
the same rule, each charged what the draft model took to write it.
"""

from __future__ import annotations

from collections.abc import Sequence

# The longest and shortest suffix looked up: a longer match is likelier to continue alike.
MAX_NGRAM = 4
MIN_NGRAM = 2
# A new sequence's chance that a drafted token is right, before it has drafted: high enough to
# try a draft where drafts are cheap, and a few trials move it.
PRIOR_ACCEPTANCE = 0.7
PRIOR_WEIGHT = 2.0
# How much of its past a sequence's acceptance keeps per draft, and per step it skips drafting:
# a sequence that stopped drafting tries again once its estimate drifts back to the prior.
DRAFT_MEMORY = 0.8
REST_MEMORY = 0.97
# A step's fixed cost in tokens' worth before any step was measured, and the step sizes the
# measured cost is fitted on (decode steps; long prefill chunks add attention costs).
DEFAULT_FIXED_TOKENS = 2.0
FIT_MAX_TOKENS = 48
FIT_MEMORY = 0.98


class Drafter:
    """One sequence's lookup index (where each n-gram of its tokens last ended) and its record
    of how its drafts fared."""

    def __init__(self, tokens: list[int]) -> None:
        self.tokens: list[int] = []
        # n-gram -> the index of the token that followed its latest occurrence.
        self._seen: dict[tuple[int, ...], int] = {}
        self._hits = 0.0
        self._trials = 0.0
        self.extend(tokens)

    @property
    def acceptance(self) -> float:
        """The estimated chance that a drafted token is right, given the ones before it were."""
        rate = (self._hits + PRIOR_ACCEPTANCE * PRIOR_WEIGHT) / (self._trials + PRIOR_WEIGHT)
        return min(rate, 0.99)

    def extend(self, tokens: Sequence[int]) -> None:
        """Add tokens the sequence now holds (its prompt, then its accepted output)."""
        toks, seen = self.tokens, self._seen
        for t in tokens:
            end = len(toks)
            for n in range(MIN_NGRAM, MAX_NGRAM + 1):
                if end >= n:
                    seen[tuple(toks[end - n : end])] = end
            toks.append(t)

    def lookup(self, k: int) -> list[int]:
        """Up to `k` tokens that followed the longest suffix of the sequence seen before."""
        toks = self.tokens
        for n in range(MAX_NGRAM, MIN_NGRAM - 1, -1):
            if len(toks) > n and (at := self._seen.get(tuple(toks[-n:]))) is not None:
                return toks[at : at + k]
        return []

    def judge(self, drafted: int, accepted: int) -> None:
        """Record a verified draft: `accepted` tokens right, then one wrong unless all were."""
        self._hits = DRAFT_MEMORY * self._hits + accepted
        self._trials = DRAFT_MEMORY * self._trials + accepted + (accepted < drafted)

    def rest(self) -> None:
        """A step without a draft: the record fades toward the prior."""
        self._hits *= REST_MEMORY
        self._trials *= REST_MEMORY


class StepCost:
    """A step's time as a fixed part plus a part per token, fitted on the steps run so far
    (least squares, recent steps weighing most)."""

    def __init__(self) -> None:
        self._w = self._n = self._t = self._nn = self._nt = 0.0

    def record(self, tokens: int, seconds: float) -> None:
        if tokens > FIT_MAX_TOKENS:
            return
        m = FIT_MEMORY
        self._w = m * self._w + 1
        self._n = m * self._n + tokens
        self._t = m * self._t + seconds
        self._nn = m * self._nn + tokens * tokens
        self._nt = m * self._nt + tokens * seconds

    @property
    def fixed_tokens(self) -> float:
        """The fixed part in tokens' worth; DEFAULT_FIXED_TOKENS until steps of different
        sizes were seen."""
        w = self._w
        var = w * self._nn - self._n * self._n
        if w < 4 or var <= 0.5 * w * w:  # too few steps, or all of about one size
            return DEFAULT_FIXED_TOKENS
        slope = (w * self._nt - self._n * self._t) / var
        if slope <= 0:
            return 64.0  # more tokens cost nothing measurable: the fixed part is everything
        intercept = (self._t - slope * self._n) / w
        return min(max(intercept / slope, 0.05), 64.0)

    @property
    def token_seconds(self) -> float | None:
        """What a token's worth of a step costs: a step of n tokens takes this times
        (fixed_tokens + n). None before a step was measured."""
        if not self._w:
            return None
        return self._t / (self.fixed_tokens * self._w + self._n)


def expected_tokens(acceptance: float, drafts: int) -> float:
    """Tokens a step yields for a sequence with `drafts` drafted: the right drafts before the
    first wrong one, and the model's own token after them."""
    a = acceptance
    return (1 - a ** (drafts + 1)) / (1 - a)


def plan_drafts(
    offers: list[tuple[float, int]],
    decoding: int,
    fixed_tokens: float,
    room: int,
    draft_cost: float = 0.0,
) -> list[int]:
    """How many of its offered drafts each sequence runs, to make the most tokens per second.

    `offers` holds each drafting sequence's (acceptance, drafts found); `decoding` counts every
    decode token of the step. A step of c tokens costs (fixed_tokens + c) units and yields one
    token per decoding sequence, plus what drafts add; finding a draft token costs `draft_cost`
    units more (a draft model's step). A sequence's drafts are taken (most promising first)
    only while they raise the step's yield per unit, and `room` caps them all.
    """
    per_draft = 1 + draft_cost
    produced, cost = float(decoding), fixed_tokens + decoding
    taken = [0] * len(offers)
    for i in sorted(range(len(offers)), key=lambda i: -offers[i][0]):
        acceptance, found = offers[i]
        best, best_rate = 0, produced / cost
        for k in range(1, min(found, room) + 1):
            rate = (produced - 1 + expected_tokens(acceptance, k)) / (cost + k * per_draft)
            if rate > best_rate:
                best, best_rate = k, rate
        if best:
            taken[i] = best
            produced += expected_tokens(acceptance, best) - 1
            cost += best * per_draft
            room -= best
    return taken
