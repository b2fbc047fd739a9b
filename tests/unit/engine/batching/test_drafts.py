"""Prompt-lookup drafting: what is drafted, which drafts a step runs, and how the scheduler keeps
the right ones and rolls back the rest (pure logic, with a fake backend)."""

from __future__ import annotations

from localserve.engine.batching.drafts import (
    Drafter,
    StepCost,
    expected_tokens,
    plan_drafts,
)
from localserve.engine.batching.scheduler import Scheduler
from localserve.engine.batching.sequence import Sequence
from localserve.ground.sampling import SamplingParams
from localserve.ground.step import StepPlan
from tests.support.fakes import TOKEN, FakeBackend

GREEDY = SamplingParams(temperature=0)


def test_the_tokens_that_followed_the_last_ngram_earlier_are_drafted() -> None:
    drafter = Drafter([5, 1, 2, 3, 4, 9, 1, 2])
    assert drafter.lookup(3) == [3, 4, 9]


def test_the_longest_matching_suffix_wins() -> None:
    drafter = Drafter([1, 2, 3, 8, 2, 3, 9, 1, 2, 3])
    assert drafter.lookup(1) == [8]  # after "1 2 3", not after the later "2 3"


def test_nothing_is_drafted_for_a_suffix_never_seen() -> None:
    assert Drafter([1, 2, 3, 4]).lookup(4) == []


def test_failed_drafts_lower_the_acceptance_and_rest_brings_it_back() -> None:
    drafter = Drafter([])
    prior = drafter.acceptance
    for _ in range(5):
        drafter.judge(4, 0)
    assert drafter.acceptance < 0.3
    for _ in range(200):
        drafter.rest()
    assert abs(drafter.acceptance - prior) < 0.05


def test_the_step_cost_fit_finds_the_fixed_part_in_tokens() -> None:
    cost = StepCost()
    for n in (1, 2, 4, 8, 1, 3, 9, 16):
        cost.record(n, 0.010 + 0.005 * n)  # a fixed 10 ms and 5 ms a token: 2 tokens' worth
    assert abs(cost.fixed_tokens - 2.0) < 0.01


def test_a_machine_whose_steps_cost_little_per_token_drafts_deeper() -> None:
    cheap = plan_drafts([(0.8, 8)], decoding=1, fixed_tokens=20.0, room=32)
    dear = plan_drafts([(0.8, 8)], decoding=1, fixed_tokens=0.7, room=32)
    assert cheap[0] > dear[0] > 0


def test_drafts_that_cost_a_draft_models_step_to_find_must_hold_more_often() -> None:
    assert plan_drafts([(0.8, 8)], decoding=1, fixed_tokens=2.0, room=32)[0] > 0
    assert plan_drafts([(0.8, 8)], decoding=1, fixed_tokens=2.0, room=32, draft_cost=3.0) == [0]
    assert plan_drafts([(0.99, 8)], decoding=1, fixed_tokens=20.0, room=32, draft_cost=2.0)[0] > 0


def test_the_step_cost_gives_a_tokens_worth_in_seconds() -> None:
    cost = StepCost()
    assert cost.token_seconds is None
    for n in (1, 2, 4, 8, 1, 3, 9, 16):
        cost.record(n, 0.010 + 0.005 * n)
    assert abs(cost.token_seconds - 0.005) < 1e-4  # type: ignore[operator]


def test_a_full_batch_runs_no_drafts() -> None:
    assert plan_drafts([(0.8, 8)], decoding=16, fixed_tokens=0.7, room=32) == [0]


def test_drafts_that_rarely_hold_are_not_run() -> None:
    assert plan_drafts([(0.3, 8)], decoding=1, fixed_tokens=2.0, room=32) == [0]


def test_expected_tokens_count_the_right_drafts_and_the_models_own() -> None:
    assert expected_tokens(0.5, 0) == 1.0
    assert abs(expected_tokens(0.5, 2) - 1.75) < 1e-9


class Echo(FakeBackend):
    """Writes the token `TOKEN` forever, and records what each step verified."""

    def __init__(self) -> None:
        super().__init__(n_slots=1, n_ctx=256)
        self.drafted: list[int] = []

    def step(self, plan: StepPlan) -> list[int]:
        self.drafted += [c.drafts for c in plan.chunks if c.drafts]
        return super().step(plan)


class Contrary(Echo):
    """Writes TOKEN, except right after a draft, where it disagrees with the first drafted one."""

    def step(self, plan: StepPlan) -> list[int]:
        out = super().step(plan)
        if any(c.drafts for c in plan.chunks):
            out[0] = TOKEN + 1
        return out


def run(backend: FakeBackend, prompt: list[int], max_new: int) -> Sequence:
    sched = Scheduler(backend, draft_tokens=8)
    seq = Sequence(prompt, GREEDY, max_new)
    sched.submit(seq)
    while seq.finish_reason is None:
        sched.step()
    return seq


def test_drafts_the_model_agrees_with_are_kept_and_output_is_as_without_them() -> None:
    backend = Echo()
    seq = run(backend, [1, TOKEN, TOKEN, TOKEN, TOKEN, TOKEN, TOKEN], max_new=20)
    assert seq.generated == [TOKEN] * 20 and seq.finish_reason == "length"
    assert backend.drafted, "the repeated tokens were drafted"
    assert len(backend.plans) < 20, "drafts made fewer steps than tokens"


def test_the_cells_of_rejected_drafts_are_trimmed_from_the_first_wrong_one() -> None:
    backend = Contrary()
    seq = run(backend, [1, TOKEN, TOKEN, TOKEN, TOKEN, TOKEN, TOKEN], max_new=3)
    first_draft = next(i for i, p in enumerate(backend.plans) if any(c.drafts for c in p.chunks))
    start = next(c for c in backend.plans[first_draft].chunks if c.drafts).start_pos
    # No draft was right: only the decode token's cell stays.
    assert (0, start + 1) in backend.trims
    assert seq.generated[1] == TOKEN + 1


def sample(params: SamplingParams) -> Echo:
    backend = Echo()
    sched = Scheduler(backend, draft_tokens=8)
    seq = Sequence([1] + [TOKEN] * 6, params, 10)
    sched.submit(seq)
    while seq.finish_reason is None:
        sched.step()
    return backend


def test_a_sequence_that_samples_drafts_too() -> None:
    assert sample(SamplingParams(temperature=0.7)).drafted


def test_a_seeded_sequence_that_samples_never_drafts() -> None:
    assert sample(SamplingParams(temperature=0.7, seed=42)).drafted == []


def test_a_sequence_with_penalties_never_drafts() -> None:
    assert sample(SamplingParams(temperature=0.7, repeat_penalty=1.3)).drafted == []


def test_a_drafted_chunk_asks_for_a_token_after_each_of_its_drafts() -> None:
    backend = Echo()
    run(backend, [1, TOKEN, TOKEN, TOKEN, TOKEN, TOKEN, TOKEN], max_new=20)
    drafted = [c for p in backend.plans for c in p.chunks if c.drafts]
    assert drafted and all(c.drafts == len(c.tokens) - 1 for c in drafted)
