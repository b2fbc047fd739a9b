"""Speculative decoding by prompt lookup: draft tokens a sequence will likely write next, by
finding its last few tokens earlier in its prompt or its output, and proposing what followed.

Editor and agent traffic repeats text: a function returned with one name changed, a file echoed
with a fix, an answer quoting its context. There the drafts are often right. The scheduler runs
a sequence's drafts after its decode token, keeps the longest prefix the model itself would have
written (its greedy choice at each drafted position), and trims the cells of the rest
(llama.cpp's `--spec-type ngram-mod`, vLLM's `[ngram]`).

Whether drafting pays depends on the machine. A step costs a fixed part (a pass over the
weights) plus a part per token; where the fixed part dominates (a GPU, a large model in slow
memory) verifying eight tokens costs little more than decoding one, but on a few CPU cores
with a small model a short draft's tokens cost most of a step each (SmolLM2 on 2 cores: 10 ms
for one token, 58 ms for nine); past about 17 rows a row costs a third of a lone token (Gemma
3 270M: 65 rows 22x one), so long drafts of long copies pay where short ones cannot. A draft
that starts a micro-batch of its own pays a fixed part again. So
the scheduler measures its own steps (`StepCost`, engine/batching/step_cost.py) and each
sequence's acceptance (`DraftRecord.acceptance`), and drafts only the tokens whose expected gain
beats their cost in tokens per second across the whole step (`plan_drafts`): a batch already
full of decode tokens gets no drafts, and a sequence whose drafts keep failing stops drafting
until its estimate recovers. A draft model's tokens (engine/batching/draft_model.py) are
weighed by the same rule, each charged what the draft model took to write it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

# The suffixes looked up, longest first: a longer match is likelier to continue alike, and in
# code a line's last few tokens occur on every line, so only a long one finds the line of the
# file an answer copies (the latest occurrence of a short one is the line before, in the answer,
# which goes on with the wrong numbers).
NGRAMS = (16, 8, 4, 3, 2)
# How far back a found match is followed to measure it, and the lengths that part its evidence:
# a copy found after 24 matching tokens (llama.cpp's ngram-mod asks that many) goes on far
# longer than one found after 2. Each band keeps its own record of how its drafts fared, so
# that a sequence's weak matches do not shorten the drafts of its long verbatim copies.
MAX_MATCH = 32
EVIDENCE = (4, 8, 16, 32)  # a match shorter than the first is band 0, of 32 or more band 4
# Tokens a step indexes for lookups, over all its sequences: about 20 ms of Python.
INDEX_PER_STEP = 8192
# Each band's prior, before the model's drafts of that band were judged: longer, likelier.
BAND_PRIORS = (0.6, 0.7, 0.8, 0.9, 0.95)
# A model's chance that a drafted token is right, before any of its sequences drafted: high
# enough to try a draft where drafts are cheap, and a few trials move it.
PRIOR_ACCEPTANCE = 0.7
PRIOR_WEIGHT = 4.0
# No estimate is certainty; but a cap of 0.99 made 20 tokens the longest draft worth its step
# (its expected yield stops near 1 / (1 - cap)), where long verbatim copies keep 64 of 64.
MAX_ACCEPTANCE = 0.998
# How much of its past a sequence's acceptance keeps per draft, and per step it skips drafting:
# a sequence that stopped drafting tries again once its estimate drifts back to its prior, which
# is what the model's drafts have fared lately (MODEL_MEMORY per draft): a new sequence of a
# model whose drafts mostly fail (a sampled answer) does not try them again and again.
DRAFT_MEMORY = 0.9
REST_MEMORY = 0.97
MODEL_MEMORY = 0.98


class DraftRecord:
    """How drafts fared, recent ones weighing most: tokens right, and tries."""

    def __init__(self, memory: float = DRAFT_MEMORY) -> None:
        self._memory = memory
        self._hits = 0.0
        self._trials = 0.0

    def acceptance(self, prior: float = PRIOR_ACCEPTANCE) -> float:
        """The estimated chance that a drafted token is right, given the ones before it were."""
        rate = (self._hits + prior * PRIOR_WEIGHT) / (self._trials + PRIOR_WEIGHT)
        return min(rate, MAX_ACCEPTANCE)

    def judge(self, drafted: int, accepted: int) -> None:
        """Record a verified draft: `accepted` tokens right, then one wrong unless all were."""
        m = self._memory
        self._hits = m * self._hits + accepted
        self._trials = m * self._trials + accepted + (accepted < drafted)

    def rest(self) -> None:
        """A step without a draft: the record fades toward the prior."""
        self._hits *= REST_MEMORY
        self._trials *= REST_MEMORY


def band(match: int) -> int:
    """The evidence band of a match of `match` tokens."""
    return sum(match >= edge for edge in EVIDENCE)


class Drafter:
    """One sequence's lookup index (where each n-gram of its tokens last ended) and its records
    of how its drafts fared, one per evidence band."""

    def __init__(self, tokens: list[int]) -> None:
        self.records = [DraftRecord() for _ in range(len(EVIDENCE) + 1)]
        self.band = 0  # the band of the last lookup's match: the draft a step verifies
        self.tokens: list[int] = list(tokens)
        # n-gram -> the index of the token that followed its latest occurrence, for the tokens
        # before `indexed`.
        self._seen: dict[tuple[int, ...], int] = {}
        self.indexed = 0

    def acceptance(self, prior: float = PRIOR_ACCEPTANCE) -> float:
        return self.records[self.band].acceptance(prior)

    def judge(self, drafted: int, accepted: int) -> None:
        self.records[self.band].judge(drafted, accepted)

    def rest(self) -> None:
        self.records[self.band].rest()

    def extend(self, tokens: Sequence[int]) -> None:
        """Add tokens the sequence now holds (its accepted output); index() looks them up."""
        self.tokens.extend(tokens)

    def index(self, budget: int) -> int:
        """Index up to `budget` more of the tokens, oldest first; how many it indexed. An
        agent's prompt of 100,000 tokens takes 0.25 s to index whole, which the steps of every
        other sequence of the model would wait for: a step indexes a bounded share
        (INDEX_PER_STEP), and drafts meanwhile find what is indexed."""
        toks, seen = self.tokens, self._seen
        start = self.indexed
        stop = min(len(toks), start + budget)
        for end in range(start, stop):
            for n in NGRAMS:
                if end >= n:
                    seen[tuple(toks[end - n : end])] = end
        self.indexed = stop
        return stop - start

    def lookup(self, k: int) -> list[int]:
        """Up to `k` tokens that followed the longest suffix of the sequence seen before, the
        lookup chained as llama.cpp's ngram-mod chains it: where the copy reaches the end of
        what the sequence holds, the suffix of the sequence and the draft so far is looked up
        again. A suffix's latest occurrence is often just behind it (a run of spaces, a line
        like the last), and its copy would end after a token or two."""
        draft: list[int] = []
        while len(draft) < k and (at := self._after(draft)) is not None:
            draft += self.tokens[at : at + k - len(draft)]
        return draft

    def _match(self, at: int) -> int:
        """How many tokens before `at` are the sequence's last ones, up to MAX_MATCH."""
        toks, end = self.tokens, len(self.tokens)
        n = 0
        while n < MAX_MATCH and n < at and toks[at - 1 - n] == toks[end - 1 - n]:
            n += 1
        return n

    def _after(self, draft: list[int]) -> int | None:
        """Where what followed the longest suffix of the tokens and `draft` begins, if any;
        the first hop sets the draft's band by how far back its match goes."""
        longest = NGRAMS[0]
        recent = (self.tokens[-longest:] + draft)[-longest:]
        for n in NGRAMS:
            if len(recent) >= n and (at := self._seen.get(tuple(recent[-n:]))) is not None:
                if not draft:
                    self.band = band(self._match(at))
                return at
        return None


def expected_tokens(acceptance: float, drafts: int) -> float:
    """Tokens a step yields for a sequence with `drafts` drafted: the right drafts before the
    first wrong one, and the model's own token after them."""
    a = acceptance
    return (1 - a ** (drafts + 1)) / (1 - a)


def plan_drafts(
    offers: list[tuple[int, float, int]],
    decoding: list[int],
    units: Callable[[list[int]], float],
    room: int,
    draft_cost: float = 0.0,
) -> list[int]:
    """How many of its offered drafts each sequence runs, to make the most tokens per second.

    `offers` holds each drafting sequence's (slot, acceptance, drafts found); `decoding` lists
    the slots of every decode token of the step. `units` prices a step, given each slot's
    tokens in slot order (engine/batching/step_cost.py: drafts that start micro-batches of
    their own cost more than those that join one); finding a draft token costs `draft_cost`
    more (a draft model's step). A step yields one token per decoding sequence, plus what
    drafts add. A sequence's drafts are taken (most promising first) only while they raise the
    step's yield per unit, and `room` caps them all.
    """
    tokens = [0] * (max(decoding, default=-1) + 1)
    for slot in decoding:
        tokens[slot] = 1
    produced, paid = float(len(decoding)), 0.0
    rate = produced / units(tokens)
    taken = [0] * len(offers)
    # While nothing is taken, every sequence's k drafts cost the same: one with less promise
    # need not try the lengths a more promising one found no gain in.
    tried = 0
    for i in sorted(range(len(offers)), key=lambda i: -offers[i][1]):
        slot, acceptance, found = offers[i]
        best, most = 0, min(found, room)
        for k in range(1 if any(taken) else tried + 1, most + 1):
            tokens[slot] = 1 + k
            cost = units(tokens) + paid + k * draft_cost
            if (gain := produced - 1 + expected_tokens(acceptance, k)) / cost > rate:
                best, rate = k, gain / cost
        tokens[slot] = 1 + best
        if not best:
            tried = max(tried, most)
            continue
        taken[i] = best
        produced += expected_tokens(acceptance, best) - 1
        paid += best * draft_cost
        room -= best
    return taken
