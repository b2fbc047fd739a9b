"""The batcher's plans, specified with a fake backend (pure logic: no kernels involved)."""

from __future__ import annotations

import asyncio

import pytest

from localserve.engine.batching.scheduler import (
    MAX_DEFERRALS,
    PREFILL_TOKENS_WHILE_DECODING,
    Scheduler,
)
from localserve.engine.batching.sequence import Sequence
from localserve.ground.errors import ContextOverflow, QueueFull
from localserve.ground.sampling import SamplingParams
from tests.support.fakes import TOKEN, FakeBackend


@pytest.fixture
def loop() -> asyncio.AbstractEventLoop:
    loop = asyncio.new_event_loop()
    yield loop
    loop.close()


def make_seq(loop: asyncio.AbstractEventLoop, n_prompt: int, max_new: int = 100) -> Sequence:
    return Sequence([1] * n_prompt, SamplingParams(temperature=0), max_new)


def test_running_sequences_decode_while_a_long_prompt_prefills_in_chunks(loop) -> None:
    backend = FakeBackend(n_slots=2, n_ctx=4096)
    sched = Scheduler(backend, step_tokens=16)
    short = make_seq(loop, 4)
    sched.submit(short)
    sched.step()  # short prefills and samples its first token
    long = make_seq(loop, 40)
    sched.submit(long)
    for _ in range(3):
        sched.step()
    for plan in backend.plans[1:]:
        by_slot = {c.slot: c for c in plan.chunks}
        assert plan.n_tokens <= 16
        assert len(by_slot[short.slot].tokens) == 1
    assert len({c.slot: c for c in backend.plans[1].chunks}[long.slot].tokens) == 15
    assert long.n_prefilled == 40


def test_max_tokens_finishes_with_length_and_frees_the_slot(loop) -> None:
    backend = FakeBackend(n_slots=1)
    sched = Scheduler(backend)
    seq = make_seq(loop, 3, max_new=2)
    sched.submit(seq)
    sched.step()
    sched.step()
    assert seq.finish_reason == "length"
    assert seq.generated == [TOKEN, TOKEN]
    assert sched.slots.free == [0] and not sched.running


def test_a_max_tokens_above_the_room_left_fills_the_context_and_ends_with_length(loop) -> None:
    # Agents ask for 32000: an upper bound, clamped on every face (tests/live/test_output_clamp.py).
    backend = FakeBackend(n_slots=1, n_ctx=16)
    sched = Scheduler(backend)
    seq = make_seq(loop, 10, max_new=32_000)
    sched.submit(seq)
    while seq.finish_reason is None:
        sched.step()
    assert seq.finish_reason == "length"
    assert 10 + len(seq.generated) == 16


def test_waiting_sequence_takes_the_slot_a_finished_one_frees(loop) -> None:
    backend = FakeBackend(n_slots=1)
    sched = Scheduler(backend)
    first, second = make_seq(loop, 2, max_new=1), make_seq(loop, 2, max_new=1)
    sched.submit(first)
    sched.submit(second)
    sched.step()
    assert first.finish_reason == "length" and second.slot is None
    sched.step()
    assert second.finish_reason == "length"


def test_full_waiting_queue_refuses_at_once(loop) -> None:
    sched = Scheduler(FakeBackend(n_slots=1), max_waiting=1)
    sched.submit(make_seq(loop, 2))
    with pytest.raises(QueueFull):
        sched.submit(make_seq(loop, 2))


def test_prompt_as_long_as_the_slot_context_is_refused(loop) -> None:
    sched = Scheduler(FakeBackend(n_ctx=8))
    with pytest.raises(ContextOverflow) as err:
        sched.submit(make_seq(loop, 8))
    assert "8 tokens" in str(err.value)


def test_prompt_sharing_a_prefix_goes_to_the_slot_holding_it_and_skips_that_prefill(loop) -> None:
    backend = FakeBackend(n_slots=2, n_ctx=256)
    sched = Scheduler(backend)
    first = Sequence([5, 6, 7, 8], SamplingParams(temperature=0), 1)
    sched.submit(first)
    sched.step()
    first_slot = sched.slots.tokens.index([5, 6, 7, 8])
    follow_up = Sequence([5, 6, 7, 8, 9, 10], SamplingParams(temperature=0), 1)
    sched.submit(follow_up)
    sched.step()
    last = backend.plans[-1].chunks[0]
    assert (last.slot, last.tokens, last.start_pos) == (first_slot, [9, 10], 4)
    assert follow_up.cached_tokens == 4


def test_repeated_prompt_reruns_only_its_last_token(loop) -> None:
    backend = FakeBackend(n_slots=1, n_ctx=256)
    sched = Scheduler(backend)
    for _ in range(2):
        sched.submit(Sequence([5, 6, 7], SamplingParams(temperature=0), 1))
        sched.step()
    assert backend.plans[-1].chunks[0].tokens == [7]
    assert (0, 2) in backend.trims


def test_sequence_that_fails_to_start_gets_an_error_and_gives_its_slot_back(loop) -> None:
    backend = FakeBackend(n_slots=1)

    def broken_start(slot: int, params: SamplingParams, prompt: list[int]) -> None:
        raise RuntimeError("no sampler for you")

    backend.seq_start = broken_start  # type: ignore[method-assign]
    sched = Scheduler(backend)
    seq = make_seq(loop, 2)
    sched.submit(seq)
    result = sched.step()
    assert seq.finish_reason == "error" and sched.slots.free == [0]
    assert result.outputs == [(seq, result.outputs[0][1])]
    assert result.outputs[0][1].error == "no sampler for you"


def test_step_lists_slots_in_ascending_order(loop) -> None:
    backend = FakeBackend(n_slots=4)
    sched = Scheduler(backend)
    for _ in range(4):
        sched.submit(make_seq(loop, 3))
    sched.step()
    sched.step()
    slots = [c.slot for c in backend.plans[-1].chunks]
    assert slots == sorted(slots) and len(slots) == 4


def test_new_sequence_joins_next_to_the_running_ones(loop) -> None:
    backend = FakeBackend(n_slots=8)
    sched = Scheduler(backend)
    first = make_seq(loop, 3)
    sched.submit(first)
    sched.step()
    second = make_seq(loop, 3)
    sched.submit(second)
    sched.step()
    assert abs(first.slot - second.slot) == 1


def test_short_prompts_sample_their_first_token_before_a_long_one_prefills(loop) -> None:
    backend = FakeBackend(n_slots=4, n_ctx=4096)
    sched = Scheduler(backend)
    long = make_seq(loop, 100)
    shorts = [make_seq(loop, 2) for _ in range(3)]
    for seq in (long, *shorts):
        sched.submit(seq)
    sched.step()
    assert all(len(s.generated) == 1 for s in shorts)
    assert long.n_prefilled == 0
    sched.step()
    assert len(long.generated) == 1 and all(len(s.generated) == 2 for s in shorts)


def test_a_long_prompt_is_put_off_for_a_bounded_number_of_steps(loop) -> None:
    backend = FakeBackend(n_slots=3, n_ctx=4096)
    sched = Scheduler(backend)
    long = make_seq(loop, 100)
    sched.submit(long)
    steps = 0
    while long.n_prefilled == 0:
        # A new short prompt every step, each finishing at its first token.
        sched.submit(make_seq(loop, 2, max_new=1))
        sched.step()
        steps += 1
        assert steps <= MAX_DEFERRALS + 2, "a steady stream of short prompts starved a long one"


def test_a_long_prompt_prefills_in_small_chunks_while_other_sequences_decode(loop) -> None:
    backend = FakeBackend(n_slots=2, n_ctx=4096)
    sched = Scheduler(backend, step_tokens=512)
    sched.submit(make_seq(loop, 2))
    sched.step()  # it decodes from now on
    sched.submit(make_seq(loop, 1000))
    sched.step()
    prefill = [c for c in backend.plans[-1].chunks if len(c.tokens) > 1]
    assert [len(c.tokens) for c in prefill] == [PREFILL_TOKENS_WHILE_DECODING]


def test_a_long_prompt_takes_the_whole_step_budget_when_nothing_else_runs(loop) -> None:
    backend = FakeBackend(n_slots=2, n_ctx=4096)
    sched = Scheduler(backend, step_tokens=512)
    sched.submit(make_seq(loop, 1000))
    sched.step()
    assert backend.plans[-1].n_tokens == 512
