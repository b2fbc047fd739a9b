"""Which waiting request a free slot goes to: a returning conversation whose cells are at hand
before older new long prompts, within a bound (pure logic: a fake backend, no kernels)."""

from __future__ import annotations

from localserve.engine.batching.priorities import MAX_PASSED_OVER, quick_first
from localserve.engine.batching.scheduler import Scheduler
from localserve.engine.batching.sequence import Sequence
from localserve.ground.sampling import SamplingParams
from tests.support.fakes import FakeBackend

GREEDY = SamplingParams(temperature=0)


def test_a_returning_conversation_takes_a_free_slot_before_an_older_long_prompt() -> None:
    sched = Scheduler(FakeBackend(n_slots=2, n_ctx=1024))
    first_turn = Sequence([5, 6, 7, 8], GREEDY, 1)
    sched.submit(first_turn)
    sched.submit(Sequence(list(range(100, 110)), GREEDY, 50))  # keeps the other slot busy
    sched.step()
    assert first_turn.finish_reason is not None
    held = next(tokens for tokens in sched.slots.tokens if tokens[:4] == [5, 6, 7, 8])
    long_prompt = Sequence(list(range(1000, 1300)), GREEDY, 8)
    next_turn = Sequence([*held, 9, 10], GREEDY, 8)
    sched.submit(long_prompt)
    sched.submit(next_turn)
    sched.step()
    assert next_turn.slot is not None and long_prompt.slot is None
    assert next_turn.cached_tokens == len(held)


def test_a_long_prompt_passed_over_often_enough_takes_the_next_free_slot() -> None:
    first = quick_first(lambda prompt: 0 if len(prompt) > 200 else len(prompt) - 1)
    long_prompt = Sequence(list(range(300)), GREEDY, 8)
    picks = [first([long_prompt, Sequence([1, 2, 3], GREEDY, 8)]) for _ in range(MAX_PASSED_OVER)]
    assert long_prompt not in picks
    assert first([long_prompt, Sequence([1, 2, 3], GREEDY, 8)]) is long_prompt


def test_quick_requests_keep_their_order_of_arrival() -> None:
    first = quick_first(lambda prompt: len(prompt) - 1)
    older, newer = Sequence([1, 2], GREEDY, 8), Sequence([3, 4], GREEDY, 8)
    assert first([older, newer]) is older
