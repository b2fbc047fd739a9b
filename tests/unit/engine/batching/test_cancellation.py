"""Cancelling, the same way for every kind of request: `batcher.cancel` sets the request's one
`cancelled` flag and wakes the engine loop; what waits leaves the queue at once, what runs frees
its slots at the engine's next step (pure logic: a fake backend)."""

from __future__ import annotations

import asyncio

import pytest

from localserve.engine.batching.embedding import EmbeddingJob
from localserve.engine.batching.scheduler import Scheduler
from localserve.engine.batching.sequence import Sequence, Status
from localserve.ground.sampling import SamplingParams
from tests.support.fakes import FakeBackend


@pytest.fixture
def loop() -> asyncio.AbstractEventLoop:
    loop = asyncio.new_event_loop()
    yield loop
    loop.close()


def make_seq(loop: asyncio.AbstractEventLoop, n_prompt: int = 2) -> Sequence:
    return Sequence([1] * n_prompt, SamplingParams(temperature=0), 100)


def test_a_cancelled_waiting_sequence_leaves_the_queue_at_once(loop) -> None:
    sched = Scheduler(FakeBackend(n_slots=1))
    seq = make_seq(loop)
    sched.submit(seq)
    sched.cancel(seq)
    assert not sched.waiting and sched.busy == 0
    assert seq.status is Status.FINISHED and seq.finish_reason == "cancelled"


def test_a_cancelled_running_sequence_frees_its_slot_at_the_next_step(loop) -> None:
    sched = Scheduler(FakeBackend(n_slots=1))
    seq = make_seq(loop)
    sched.submit(seq)
    sched.step()
    sched.cancel(seq)
    sched.step()
    assert not sched.running and sched.slots.free == [0]
    assert seq.finish_reason == "cancelled"


def test_a_cancelled_embedding_job_frees_its_slots_at_the_next_step(loop) -> None:
    sched = Scheduler(FakeBackend(n_slots=2), step_tokens=2)
    job = EmbeddingJob([[1, 2, 3, 4, 5, 6], [1, 2, 3, 4, 5, 6], [1]])
    sched.submit_embedding(job)
    sched.step()  # two inputs run, the third waits
    sched.cancel(job)
    sched.step()
    assert not sched.has_work()
    assert sorted(sched.slots.free) == [0, 1]


@pytest.mark.parametrize("kind", ["sequence", "embedding job"])
def test_cancelling_sets_the_request_flag_and_wakes_the_engine_loop(loop, kind: str) -> None:
    sched = Scheduler(FakeBackend(n_slots=1))
    wakes: list[int] = []
    sched.attach(lambda: wakes.append(1))
    if kind == "sequence":
        request: Sequence | EmbeddingJob = make_seq(loop)
        sched.submit(request)
    else:
        request = EmbeddingJob([[1, 2]])
        sched.submit_embedding(request)
    woken = len(wakes)
    sched.cancel(request)
    assert request.cancelled and len(wakes) == woken + 1
