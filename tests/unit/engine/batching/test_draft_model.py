"""A draft model's slots follow the model's lazily: what a slot holds is kept as far as the
sequence still agrees with it, and only the rest is run (the fake draft writes token 7)."""

from __future__ import annotations

from localserve.engine.batching.draft_model import CATCH_UP_TOKENS, DraftModel
from tests.support.fakes import TOKEN, FakeBackend


def ran(backend: FakeBackend) -> list[tuple[int, list[int], int, bool]]:
    return [(c.slot, c.tokens, c.start_pos, c.sample) for p in backend.plans for c in p.chunks]


def test_a_first_draft_runs_the_whole_sequence_then_drafts_one_token_a_step() -> None:
    backend = FakeBackend()
    drafts = DraftModel(backend, step_tokens=64).propose([(0, [1, 2, 3], 3)])
    assert drafts == [[TOKEN] * 3]
    assert ran(backend) == [(0, [1, 2, 3], 0, True), (0, [TOKEN], 3, True), (0, [TOKEN], 4, True)]


def test_a_returning_sequence_runs_only_what_the_slot_lacks() -> None:
    backend = FakeBackend()
    draft = DraftModel(backend, step_tokens=64)
    draft.propose([(0, [1, 2, 3], 2)])  # the slot now holds 1 2 3 7
    backend.calls.clear()
    draft.propose([(0, [1, 2, 3, 5, 6], 1)])  # the model wrote 5 where the draft said 7
    assert (0, 3) in backend.trims, "the rejected draft's cell goes"
    assert ran(backend) == [(0, [5, 6], 3, True)]


def test_a_long_catch_up_is_split_within_the_step_budget() -> None:
    backend = FakeBackend()
    DraftModel(backend, step_tokens=4).propose([(0, list(range(1, 11)), 1)])
    assert [len(c.tokens) for p in backend.plans for c in p.chunks] == [4, 4, 2]
    assert [c.sample for p in backend.plans for c in p.chunks] == [False, False, True]


def test_a_long_sequence_new_to_the_draft_is_caught_up_over_several_proposals() -> None:
    backend = FakeBackend(n_ctx=512)
    draft = DraftModel(backend, step_tokens=512)
    tokens = list(range(1, 301))
    assert draft.propose([(0, tokens, 2)]) == [[]], "no draft while it is caught up"
    assert draft.propose([(0, tokens, 2)]) == [[]]
    assert draft.propose([(0, tokens, 2)]) == [[TOKEN, TOKEN]]
    runs = [len(c.tokens) for p in backend.plans for c in p.chunks]
    assert runs == [CATCH_UP_TOKENS, CATCH_UP_TOKENS, 300 - 2 * CATCH_UP_TOKENS, 1]


def test_sequences_draft_together_in_one_step_per_token() -> None:
    backend = FakeBackend()
    drafts = DraftModel(backend, step_tokens=64).propose([(1, [4, 5], 2), (0, [1, 2, 3], 1)])
    assert drafts == [[TOKEN, TOKEN], [TOKEN]]
    assert [[c.slot for c in p.chunks] for p in backend.plans] == [[0, 1], [1]]


def test_a_draft_stops_at_an_end_of_generation() -> None:
    backend = FakeBackend(eos=TOKEN)
    assert DraftModel(backend, step_tokens=64).propose([(0, [1, 2], 5)]) == [[TOKEN]]


def test_a_failing_draft_offers_nothing_and_starts_its_slots_over() -> None:
    class Failing(FakeBackend):
        def step(self, plan):  # type: ignore[no-untyped-def]
            raise RuntimeError("decode failed")

    backend = Failing()
    draft = DraftModel(backend, step_tokens=64)
    assert draft.propose([(0, [1, 2, 3], 2)]) == [[]]
    assert backend.trims[-1] == (0, 0)
