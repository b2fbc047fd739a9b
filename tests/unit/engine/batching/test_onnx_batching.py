"""The ONNX batcher's batch formation policy, on a fake static runtime (pure logic, no model).

The fake runtime answers every step with one token per request and ends a request at its
max_new tokens, as onnxruntime-genai's static Engine does; what is under test is only who
joins which batch, and when.
"""

from __future__ import annotations

import asyncio
import time

import pytest

from localserve.engine.batching.onnx_batcher import BatchPolicy, OnnxBatcher
from localserve.engine.batching.sequence import Sequence, Status
from localserve.ground.errors import QueueFull
from localserve.ground.sampling import SamplingParams
from tests.support.fakes import TOKEN, FakeRuntime


@pytest.fixture
def loop():
    loop = asyncio.new_event_loop()
    yield loop
    loop.close()


def make(policy: BatchPolicy) -> tuple[OnnxBatcher, FakeRuntime, list[int]]:
    runtime = FakeRuntime()
    batcher = OnnxBatcher(runtime, policy)
    wakes: list[int] = []
    batcher.attach(lambda: wakes.append(1))
    return batcher, runtime, wakes


def seq(loop, max_tokens: int = 4) -> Sequence:
    return Sequence([1, 2, 3], SamplingParams(temperature=0), max_tokens)


def test_a_full_batch_starts_at_once(loop) -> None:
    batcher, _, _ = make(BatchPolicy(max_batch_size=4, max_queue_delay_ms=60_000, max_waiting=64))
    for _ in range(4):
        batcher.submit(seq(loop))
    assert batcher.has_work()
    batcher.step()
    assert len(batcher.running) == 4 and not batcher.waiting


def test_an_idle_model_waits_the_queue_delay_for_its_batch_to_fill(loop) -> None:
    batcher, _, wakes = make(BatchPolicy(max_batch_size=4, max_queue_delay_ms=50, max_waiting=64))
    batcher.submit(seq(loop))
    assert not batcher.has_work()
    woken = len(wakes)
    time.sleep(0.15)
    assert batcher.has_work()
    assert len(wakes) > woken, "the delay's timer wakes the engine loop"


def test_requests_arriving_while_a_batch_runs_join_the_next_batch(loop) -> None:
    batcher, _, _ = make(BatchPolicy(max_batch_size=4, max_queue_delay_ms=0, max_waiting=64))
    first = [seq(loop, max_tokens=3) for _ in range(2)]
    for s in first:
        batcher.submit(s)
    batcher.step()
    late = seq(loop, max_tokens=3)
    batcher.submit(late)
    batcher.step()
    assert late.status is Status.WAITING and len(batcher.running) == 2
    batcher.step()  # the first batch's last step
    assert all(s.finish_reason == "length" for s in first)
    batcher.step()
    assert late.status is Status.RUNNING and batcher.batches == 2


def test_a_finished_sequence_ends_at_once_while_its_batch_runs_on(loop) -> None:
    batcher, _, _ = make(BatchPolicy(max_batch_size=2, max_queue_delay_ms=0, max_waiting=64))
    short, long = seq(loop, max_tokens=1), seq(loop, max_tokens=5)
    batcher.submit(short)
    batcher.submit(long)
    batcher.step()
    assert short.finish_reason == "length" and short.completion_tokens == 1
    assert long.status is Status.RUNNING


def test_a_stop_string_ends_the_sequence_and_cancels_its_row(loop) -> None:
    batcher, runtime, _ = make(BatchPolicy(max_batch_size=2, max_queue_delay_ms=0, max_waiting=64))
    stopped = Sequence([1], SamplingParams(temperature=0, stop=("xx",)), 10)
    batcher.submit(stopped)
    batcher.step()
    batcher.step()
    assert stopped.finish_reason == "stop"
    assert runtime.cancelled == [stopped.id]


def test_a_full_queue_refuses_a_request_at_once(loop) -> None:
    batcher, _, _ = make(BatchPolicy(max_batch_size=4, max_queue_delay_ms=60_000, max_waiting=2))
    batcher.submit(seq(loop))
    batcher.submit(seq(loop))
    with pytest.raises(QueueFull):
        batcher.submit(seq(loop))


def test_a_cancelled_waiting_request_leaves_the_queue(loop) -> None:
    batcher, _, _ = make(BatchPolicy(max_batch_size=4, max_queue_delay_ms=60_000, max_waiting=64))
    s = seq(loop)
    batcher.submit(s)
    batcher.cancel(s)
    assert not batcher.waiting and s.finish_reason == "cancelled" and batcher.busy == 0


def test_regroup_sends_the_stragglers_back_to_the_head_with_what_they_generated(loop) -> None:
    policy = BatchPolicy(max_batch_size=2, max_queue_delay_ms=0, max_waiting=64, regroup_at=1)
    batcher, runtime, _ = make(policy)
    short, straggler = seq(loop, max_tokens=1), seq(loop, max_tokens=50)
    batcher.submit(short)
    batcher.submit(straggler)
    batcher.step()  # short ends; the straggler runs alone
    queued = seq(loop)
    batcher.submit(queued)
    batcher.step()
    assert batcher.regroups == 1
    assert set(batcher.running) == {straggler, queued}
    assert runtime.begun[-2] == straggler.prompt + [TOKEN], "it continues from its own tokens"
