"""The step cost model: how llama.cpp cuts a step into micro-batches, and the fit of a step's
time to them (pure logic)."""

from __future__ import annotations

import random

from localserve.engine.batching.step_cost import StepCost, micro_batches
from localserve.ground.step import StepChunk, StepPlan


def split_equal(tokens_by_slot: list[int]) -> list[int]:
    """llama.cpp's own cut, step by step: from the lowest slot with tokens left, the run of
    consecutive slots with tokens left, each giving as many as the shortest of them has."""
    left, sizes = list(tokens_by_slot), []
    while any(left):
        first = next(i for i, n in enumerate(left) if n)
        run = [first]
        while run[-1] + 1 < len(left) and left[run[-1] + 1]:
            run.append(run[-1] + 1)
        shortest = min(left[i] for i in run)
        for i in run:
            left[i] -= shortest
        sizes.append(shortest * len(run))
    return sizes


def test_one_decode_token_per_slot_is_one_micro_batch() -> None:
    assert micro_batches([1] * 12) == [12]


def test_one_slots_drafts_run_as_a_micro_batch_of_their_own() -> None:
    assert sorted(micro_batches([1, 1, 1, 3, 1])) == [2, 5]


def test_equal_drafts_in_adjacent_slots_share_a_micro_batch() -> None:
    assert sorted(micro_batches([3, 3, 3, 1, 1])) == [5, 6]


def test_drafting_slots_far_apart_run_a_micro_batch_each() -> None:
    assert sorted(micro_batches([3, 1, 1, 3, 1, 1, 3])) == [2, 2, 2, 7]


def test_a_slot_not_in_the_step_splits_the_run() -> None:
    assert micro_batches([1, 0, 1]) == [1, 1]


def test_the_micro_batches_are_llama_cpps_cut() -> None:
    rng = random.Random(7)
    for _ in range(2000):
        tokens = [rng.choice([0, 1, 1, 1, 2, 3, 9]) for _ in range(rng.randint(1, 16))]
        assert sorted(micro_batches(tokens)) == sorted(split_equal(tokens))


def plan(tokens_by_slot: list[int]) -> StepPlan:
    chunks = [StepChunk(slot, [7] * n, 0, True) for slot, n in enumerate(tokens_by_slot) if n]
    return StepPlan(chunks)


def timed(tokens_by_slot: list[int]) -> float:
    """A machine whose micro-batches cost 9 ms and 5 ms a token, a lone token 10 ms."""
    return sum(0.010 if n == 1 else 0.009 + 0.005 * n for n in split_equal(tokens_by_slot))


def test_the_fit_finds_the_fixed_part_the_token_and_the_lone_token() -> None:
    cost = StepCost()
    for _ in range(3):
        for tokens in ([1], [3], [9], [1, 1, 1], [1, 4, 1], [2, 2, 1, 1], [1] * 12, [5, 1, 5]):
            cost.record(plan(tokens), timed(tokens))
    assert abs(cost.token_seconds - 0.005) < 2e-4  # type: ignore[operator]
    assert abs(cost.lone_tokens - 2.0) < 0.1
    assert abs(cost.units([1, 1, 1, 1]) - (1.8 + 4)) < 0.1


def test_before_any_step_a_micro_batch_costs_two_tokens_worth_and_its_tokens() -> None:
    cost = StepCost()
    assert cost.token_seconds is None
    assert cost.units([1]) == 3.0 and cost.units([1, 1]) == 4.0 and cost.units([2, 1]) == 7.0


def test_one_stream_that_never_drafted_keeps_the_prior_shape_at_its_measured_scale() -> None:
    cost = StepCost()
    for _ in range(20):
        cost.record(plan([1]), 0.012)
    assert abs(cost.lone_tokens - 3.0) < 0.01
    assert abs(cost.token_seconds - 0.004) < 1e-4  # type: ignore[operator]


def test_long_prefill_steps_are_not_fitted() -> None:
    cost = StepCost()
    cost.record(plan([128]), 1.0)
    assert cost.token_seconds is None
