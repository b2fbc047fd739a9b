"""Speculative decoding with a draft model: a smaller model of the same vocabulary writes a
sequence's next tokens greedily, and the model verifies them in its own step, by the same path
as prompt lookup's drafts (engine/batching/drafts.py, scheduler's _verify).

The draft's slots follow the model's lazily. Its slot n holds the cells of some tokens, recorded
here; when the sequence in the model's slot n drafts, the draft keeps the longest prefix the two
share, trims the rest, and prefills what the sequence holds beyond it. So nothing that moves the
model's cells (a prefill, a rejected draft's trim, a prompt-cache restore, a copy between slots,
a preemption) needs telling the draft: at worst it prefills again, at the draft's own speed.

A draft proposes with certainty (its argmax), so a sampled sequence's drafts are judged by the
same rule as prompt lookup's (backends/draft_rule.py).
"""

from __future__ import annotations

import logging
import time

from localserve.backends.base import SlotBackend
from localserve.engine.batching.prefix import common_prefix
from localserve.ground.sampling import SamplingParams
from localserve.ground.step import StepChunk, StepPlan

log = logging.getLogger(__name__)

_GREEDY = SamplingParams(temperature=0.0)
# Tokens one proposal may spend catching slots up: a sequence new to the draft prefills its
# prompt there over several steps, drafting once it holds it all, so the other sequences'
# steps never wait for a whole prompt (the scheduler's own chunked prefill, for the draft).
CATCH_UP_TOKENS = 128
# How much of the past the draft's measured time per drafted token keeps per proposal.
COST_MEMORY = 0.9


class DraftModel:
    """The draft model of one model, with the tokens each of its slots holds."""

    def __init__(self, backend: SlotBackend, step_tokens: int) -> None:
        self.backend = backend
        self.step_tokens = step_tokens
        self._held: dict[int, list[int]] = {}
        # Time and tokens of the rounds that only drafted (a round that also caught a slot up
        # costs a prefill, paid once per sequence, not per draft).
        self._seconds = self._tokens = 0.0

    @property
    def seconds_per_token(self) -> float | None:
        """What one drafted token has cost, measured; None before a round was measured."""
        return self._seconds / self._tokens if self._tokens else None

    def propose(self, wants: list[tuple[int, list[int], int]]) -> list[list[int]]:
        """For each (slot, tokens, k): up to k tokens the draft writes after `tokens`, fewer
        where it writes an end of generation. Nothing where the draft fails: drafts are only
        ever a guess."""
        todo: dict[int, list[int]] = {}
        room: dict[int, int] = {}
        budget = CATCH_UP_TOKENS
        for slot, tokens, k in wants:
            rest = self._catch_up(slot, tokens)
            behind = len(rest) - 1  # tokens to run before the one that drafts
            if behind <= budget:
                todo[slot], room[slot] = rest, k
            elif budget > 0:  # only prefill this time, and draft at a later step
                todo[slot], room[slot] = rest[:budget], 0
            budget = max(0, budget - behind)
        drafts: dict[int, list[int]] = {slot: [] for slot, _, _ in wants}
        try:
            while todo:
                self._round(todo, room, drafts)
        except Exception:  # a draft that fails costs its drafts, never the model's sequences
            log.exception("the draft model of a model failed; its slots start over")
            for slot in list(self._held):
                self.backend.seq_trim(slot, 0)
                self._held[slot] = []
            return [[] for _ in wants]
        return [drafts[slot] for slot, _, _ in wants]

    def _catch_up(self, slot: int, tokens: list[int]) -> list[int]:
        """Trim the slot to what it shares with `tokens`; return what it must run still (at
        least the last token, whose logits give the first draft)."""
        held = self._held.get(slot)
        if held is None:  # a slot first drafted for: whatever it holds is not on record
            self.backend.seq_start(slot, _GREEDY, [])
            self.backend.seq_trim(slot, 0)
            held = self._held[slot] = []
        shared = min(common_prefix(held, tokens), len(tokens) - 1)
        if shared < len(held):
            if not self.backend.seq_trim(slot, shared):
                self.backend.seq_trim(slot, 0)
                shared = 0
            del held[shared:]
        return tokens[shared:]

    def _round(
        self, todo: dict[int, list[int]], room: dict[int, int], drafts: dict[int, list[int]]
    ) -> None:
        """One step of the draft: what each slot has left to run, within the step's tokens; a
        slot that ran all of it drafts a token, and has that token to run next."""
        plan, budget = StepPlan(), self.step_tokens
        for slot in sorted(todo):
            if budget <= 0:
                break
            rest = todo[slot]
            take = rest[:budget]
            sample = len(take) == len(rest) and room[slot] > 0
            plan.chunks.append(StepChunk(slot, take, len(self._held[slot]), sample))
            budget -= len(take)
        t0 = time.perf_counter()
        sampled = iter(self.backend.step(plan))
        seconds = time.perf_counter() - t0
        if plan.n_tokens == len(plan.chunks):  # only drafting: its time is the drafts' cost
            self._seconds = COST_MEMORY * self._seconds + seconds
            self._tokens = COST_MEMORY * self._tokens + plan.n_tokens
        for chunk in plan.chunks:
            slot = chunk.slot
            self._held[slot].extend(chunk.tokens)
            todo[slot] = todo[slot][len(chunk.tokens) :]
            if not chunk.sample:
                if not todo[slot]:
                    del todo[slot]
                continue
            token = next(sampled)
            drafts[slot].append(token)
            if len(drafts[slot]) < room[slot] and not self.backend.is_end_of_generation(token):
                todo[slot] = [token]
            else:
                del todo[slot]
