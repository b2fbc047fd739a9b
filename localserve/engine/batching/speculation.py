"""A model's speculative decoding, as its scheduler uses it: which decoding sequences draft in a
step and what, from prompt lookup (engine/batching/drafts.py) or from a draft model
(engine/batching/draft_model.py), as many tokens as the cost model says pay; what became of
them, for /metrics.
"""

from __future__ import annotations

from localserve.engine.batching.draft_model import DraftModel
from localserve.engine.batching.drafts import (
    BAND_PRIORS,
    EVIDENCE,
    INDEX_PER_STEP,
    MODEL_MEMORY,
    Drafter,
    DraftRecord,
    plan_drafts,
)
from localserve.engine.batching.sequence import Sequence
from localserve.engine.batching.step_cost import StepCost

# Draft tokens one step may verify, whatever the cost model allows (see drafts.plan_drafts).
MAX_STEP_DRAFTS = 64


class Speculation:
    """The drafts of one model's sequences."""

    def __init__(
        self,
        draft_tokens: int,
        n_ctx_slot: int,
        draft_model: DraftModel | None = None,
        size_ratio: float = 1.0,
    ) -> None:
        self.draft_tokens = draft_tokens  # the server's --speculative
        self.n_ctx_slot = n_ctx_slot
        self.draft_model = draft_model
        # The draft model's size over the model's: its step's cost, before one was measured.
        self.size_ratio = size_ratio
        self.step_cost = StepCost()
        # How this model's drafts fared lately, by evidence band: each sequence's prior.
        self.records = [DraftRecord(MODEL_MEMORY) for _ in range(len(EVIDENCE) + 1)]
        self.drafted = 0
        self.accepted = 0
        self._index_budget = INDEX_PER_STEP  # what the step being planned may still index

    def counts(self) -> dict[str, int]:
        """Draft tokens verified and accepted so far, for /metrics."""
        return {"drafted": self.drafted, "accepted": self.accepted}

    def drafts(self, decoders: list[Sequence], budget: int) -> dict[int, list[int]]:
        """The draft tokens each decoding sequence runs in this step, by sequence id: those
        its prompt lookup or the draft model offers, as many as pay for themselves."""
        offers: list[tuple[Sequence, int, list[int]]] = []
        self._index_budget = INDEX_PER_STEP
        for seq in decoders:
            if (k := self._room(seq)) <= 0:
                continue
            if self.draft_model is not None:  # the draft model's tokens cost a step to find
                offers.append((seq, k, []))
            elif found := self._lookup(seq, k):
                offers.append((seq, len(found), found))
        if not offers:
            return {}
        room = min(MAX_STEP_DRAFTS, budget - len(decoders))
        rates = [(_slot(seq), self._acceptance(seq), k) for seq, k, _ in offers]
        slots = [_slot(seq) for seq in decoders]
        taken = plan_drafts(rates, slots, self.step_cost.units, room, self._draft_cost())
        for (seq, _, _), k in zip(offers, taken):
            if not k:
                _drafter(seq).rest()
        chosen = [(seq, k, found) for (seq, _, found), k in zip(offers, taken) if k]
        if self.draft_model is None:
            return {seq.id: found[:k] for seq, k, found in chosen}
        wants = [(_slot(seq), [*seq.held, seq.generated[-1]], k) for seq, k, _ in chosen]
        proposed = self.draft_model.propose(wants)
        return {seq.id: tokens for (seq, _, _), tokens in zip(chosen, proposed) if tokens}

    def judge(self, seq: Sequence, drafted: int, kept: int) -> None:
        """Record how a sequence's verified drafts fared."""
        drafter = _drafter(seq)
        drafter.judge(drafted, kept)
        self.records[drafter.band].judge(drafted, kept)
        self.drafted += drafted
        self.accepted += kept

    def _acceptance(self, seq: Sequence) -> float:
        """The sequence's estimate for its draft's band, its prior the model's for that band."""
        drafter = _drafter(seq)
        model = self.records[drafter.band]
        return drafter.acceptance(model.acceptance(BAND_PRIORS[drafter.band]))

    def _room(self, seq: Sequence) -> int:
        """How many drafts `seq` may run: its draft length, at most what it could keep (its
        token cap, its context); none where it may not draft."""
        k = seq.params.draft_tokens
        k = self.draft_tokens if k is None else k
        if k <= 0 or not seq.params.can_draft:
            return 0
        left = seq.max_new_tokens - len(seq.generated) - 1
        return min(k, left, self.n_ctx_slot - seq.position - 2)

    def _lookup(self, seq: Sequence, k: int) -> list[int]:
        if seq.drafter is None:
            seq.drafter = Drafter(seq.prompt)
        drafter = seq.drafter
        drafter.extend(seq.generated[len(drafter.tokens) - len(seq.prompt) :])
        self._index_budget -= drafter.index(self._index_budget)
        return drafter.lookup(k)

    def _draft_cost(self) -> float:
        """What finding one draft token costs, in the model's tokens' worth: none for a lookup;
        for a draft model, its measured time per drafted token over the model's time per
        token, or, until both were measured, a one-token step of the model scaled by the two's
        sizes."""
        if self.draft_model is None:
            return 0.0
        draft, token = self.draft_model.seconds_per_token, self.step_cost.token_seconds
        if draft is not None and token is not None:
            return draft / token
        return self.size_ratio * self.step_cost.lone_tokens


def _drafter(seq: Sequence) -> Drafter:
    """The sequence's record of its drafts (with no lookup index where a draft model drafts)."""
    if seq.drafter is None:
        seq.drafter = Drafter([])
    return seq.drafter


def _slot(seq: Sequence) -> int:
    assert seq.slot is not None
    return seq.slot
