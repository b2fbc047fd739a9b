"""Prompt-lookup drafting: what is drafted, which drafts a step runs, and how the scheduler keeps
the right ones and rolls back the rest (pure logic, with a fake backend)."""

from __future__ import annotations

from collections.abc import Callable

from localserve.engine.batching.drafts import (
    MAX_MATCH,
    Drafter,
    band,
    expected_tokens,
    plan_drafts,
)
from localserve.engine.batching.scheduler import Scheduler
from localserve.engine.batching.sequence import Sequence
from localserve.engine.batching.step_cost import micro_batches
from localserve.ground.sampling import SamplingParams
from localserve.ground.step import StepPlan
from tests.support.fakes import TOKEN, FakeBackend

GREEDY = SamplingParams(temperature=0)


def indexed(tokens: list[int]) -> Drafter:
    drafter = Drafter(tokens)
    drafter.index(len(tokens))
    return drafter


def test_the_tokens_that_followed_the_last_ngram_earlier_are_drafted() -> None:
    drafter = indexed([5, 1, 2, 3, 4, 9, 1, 2])
    assert drafter.lookup(3) == [3, 4, 9]


def test_the_longest_matching_suffix_wins() -> None:
    drafter = indexed([1, 2, 3, 8, 2, 3, 9, 1, 2, 3])
    assert drafter.lookup(1) == [8]  # after "1 2 3", not after the later "2 3"


def test_a_copy_that_reaches_the_end_of_the_sequence_goes_on_from_its_own_suffix() -> None:
    # "3 1 2" last followed at 5, where only three tokens remain: the lookup chains on.
    drafter = indexed([1, 2, 3, 1, 2, 3, 1, 2])
    assert drafter.lookup(7) == [3, 1, 2, 3, 1, 2, 3]


def test_a_run_of_one_token_drafts_as_long_as_asked() -> None:
    # Indentation: the suffix's latest occurrence is one token behind it.
    assert indexed([9, 4, 4, 4, 4]).lookup(6) == [4] * 6


def code_lines(numbers: list[int]) -> list[int]:
    """Lines alike but for a number each: `7 8 9 N 10` (an `if x > N:` line, say)."""
    return [t for n in numbers for t in (7, 8, 9, n, 10)]


def test_a_copy_drafts_from_the_line_it_copies_not_the_latest_line_like_it() -> None:
    # A file of lines 101..104, then an answer that has copied it up to line 103 and begun the
    # next: the short suffix `10 7 8 9` last occurred in the answer, before 103; the long one
    # finds the file's line 103, and so its line 104.
    prompt = code_lines([101, 102, 103, 104])
    drafter = indexed(prompt + [0] + code_lines([101, 102, 103]) + [7, 8, 9])
    assert drafter.lookup(6) == [104, 10, 0, 7, 8, 9]


def test_a_long_match_puts_the_draft_in_a_band_of_its_own() -> None:
    text = list(range(100, 140))
    short, long = indexed([1, 2, 5, 1, 2]), indexed(text + [0] + text[:-5])
    short.lookup(4)
    long.lookup(4)
    assert short.band == band(2) < long.band == band(MAX_MATCH)
    long.judge(4, 4)
    assert long.records[long.band].acceptance() > short.records[long.band].acceptance()


def test_a_long_prompt_is_indexed_a_share_at_a_time_and_found_once_indexed() -> None:
    text = list(range(100, 140))
    drafter = Drafter(text + [0] * 50 + text[:10])
    assert drafter.index(60) == 60 and drafter.indexed == 60
    assert drafter.lookup(3) == [110, 111, 112]  # the first 60 hold text's first occurrence
    assert drafter.index(1000) == 40 and drafter.index(1000) == 0


def test_nothing_is_drafted_for_a_suffix_never_seen() -> None:
    assert indexed([1, 2, 3, 4]).lookup(4) == []


def test_failed_drafts_lower_the_acceptance_and_rest_brings_it_back_to_the_prior() -> None:
    drafter = Drafter([])
    for _ in range(10):
        drafter.judge(4, 0)
    assert drafter.acceptance(prior=0.7) < 0.3
    for _ in range(200):
        drafter.rest()
    assert abs(drafter.acceptance(prior=0.7) - 0.7) < 0.05
    assert abs(drafter.acceptance(prior=0.4) - 0.4) < 0.05


def price(fixed: float, lone: float | None = None) -> Callable[[list[int]], float]:
    """A step's cost in tokens' worth: each micro-batch's fixed part and tokens, a lone token's
    `lone` (the fixed part and one token unless told)."""
    lone = fixed + 1 if lone is None else lone
    return lambda tokens: sum(lone if n == 1 else fixed + n for n in micro_batches(tokens))


def one_stream(acceptance: float, found: int = 8) -> list[tuple[int, float, int]]:
    return [(0, acceptance, found)]


def test_a_machine_whose_steps_cost_little_per_token_drafts_deeper() -> None:
    cheap = plan_drafts(one_stream(0.8), [0], price(20.0), room=32)
    dear = plan_drafts(one_stream(0.8), [0], price(0.7), room=32)
    assert cheap[0] > dear[0] > 0


def test_a_lone_token_cheaper_than_the_fixed_part_and_a_token_makes_drafts_dearer() -> None:
    assert plan_drafts(one_stream(0.8), [0], price(2.0), room=32)[0] > 0
    assert plan_drafts(one_stream(0.8), [0], price(2.0, lone=2.0), room=32) == [0]


def test_drafts_that_cost_a_draft_models_step_to_find_must_hold_more_often() -> None:
    assert plan_drafts(one_stream(0.8), [0], price(2.0), room=32)[0] > 0
    assert plan_drafts(one_stream(0.8), [0], price(2.0), room=32, draft_cost=3.0) == [0]
    assert plan_drafts(one_stream(0.99), [0], price(20.0), room=32, draft_cost=2.0)[0] > 0


def test_a_full_batch_runs_no_drafts() -> None:
    assert plan_drafts(one_stream(0.8), list(range(16)), price(0.7), room=32) == [0]


def test_drafts_that_rarely_hold_are_not_run() -> None:
    assert plan_drafts(one_stream(0.3), [0], price(2.0), room=32) == [0]


def test_a_draft_that_joins_another_ones_micro_batch_pays_where_one_far_apart_does_not() -> None:
    decoding = [0, 1, 2, 3]
    adjacent = [(0, 0.99, 8), (1, 0.9, 8)]
    apart = [(0, 0.99, 8), (3, 0.9, 8)]
    assert plan_drafts(adjacent, decoding, price(4.0), room=32) == [8, 8]
    assert plan_drafts(apart, decoding, price(4.0), room=32) == [8, 0]


def test_a_less_promising_sequence_with_more_drafts_found_is_still_weighed() -> None:
    offers = [(0, 0.9, 1), (1, 0.85, 8)]
    assert plan_drafts(offers, [0, 1], price(20.0), room=32) == [0, 8]


def test_room_caps_the_drafts_of_the_whole_step() -> None:
    offers = [(0, 0.99, 8), (1, 0.99, 8)]
    assert sum(plan_drafts(offers, [0, 1], price(40.0), room=10)) <= 10


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
    """Writes TOKEN, except right after a draft, where it disagrees with the first drafted one
    (whatever that was: a lookup can also draft a token it disagreed with before)."""

    def step(self, plan: StepPlan) -> list[int]:
        out = super().step(plan)
        drafting = [c for c in plan.chunks if c.drafts]
        if drafting:
            out[0] = drafting[0].tokens[-drafting[0].drafts] + 1
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


def test_a_model_whose_drafts_fail_gives_its_next_sequences_a_lower_prior() -> None:
    backend = Contrary()
    sched = Scheduler(backend, draft_tokens=8)
    before = sched.drafting.records[0].acceptance()
    for _ in range(3):
        seq = Sequence([1, TOKEN, TOKEN, TOKEN, TOKEN, TOKEN, TOKEN], GREEDY, 12)
        sched.submit(seq)
        while seq.finish_reason is None:
            sched.step()
    assert backend.drafted and sched.drafting.records[0].acceptance() < before - 0.1


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
