"""The ONNX batcher over a continuous runtime (our own KV rows on the CPU, or a paged Engine):
a request joins the running batch at the next step, on a fake runtime (pure logic, no model).

The fake runtime answers every step with one token per running turn and ends a turn at its
max_new tokens; unlike a static Engine, it takes new turns between any two steps.
"""

from __future__ import annotations

from localserve.engine.batching.onnx_batcher import BatchPolicy, OnnxBatcher
from localserve.engine.batching.sequence import Sequence, Status
from localserve.ground.sampling import SamplingParams
from tests.support.fakes import FakeRuntime


class ContinuousRuntime(FakeRuntime):
    continuous = True


def make(max_batch_size: int = 4, **policy: float) -> OnnxBatcher:
    settings = {"max_queue_delay_ms": 60_000, "max_waiting": 64, **policy}
    batcher = OnnxBatcher(ContinuousRuntime(), BatchPolicy(max_batch_size, **settings))  # type: ignore[arg-type]
    batcher.attach(lambda: None)
    return batcher


def seq(max_tokens: int = 4) -> Sequence:
    return Sequence([1, 2, 3], SamplingParams(temperature=0), max_tokens)


def test_a_request_to_an_idle_model_starts_without_the_queue_delay() -> None:
    batcher = make()
    s = seq()
    batcher.submit(s)
    assert batcher.has_work()
    batcher.step()
    assert s.status is Status.RUNNING and s.completion_tokens == 1


def test_a_request_arriving_while_a_batch_runs_joins_it_at_the_next_step() -> None:
    batcher = make()
    first = seq(max_tokens=10)
    batcher.submit(first)
    batcher.step()
    late = seq(max_tokens=10)
    batcher.submit(late)
    batcher.step()
    assert late.status is Status.RUNNING and late.completion_tokens == 1
    assert first.status is Status.RUNNING and first.completion_tokens == 2


def test_a_request_waits_only_while_every_row_is_in_use() -> None:
    batcher = make(max_batch_size=2)
    short, long = seq(max_tokens=2), seq(max_tokens=10)
    batcher.submit(short)
    batcher.submit(long)
    batcher.step()
    waiting = seq()
    batcher.submit(waiting)
    batcher.step()  # short ends in this step and frees its row
    assert short.finish_reason == "length" and waiting.status is Status.WAITING
    batcher.step()
    assert waiting.status is Status.RUNNING and long.status is Status.RUNNING


def test_a_continuous_batch_is_never_regrouped() -> None:
    batcher = make(max_batch_size=2, regroup_at=1)
    running = seq(max_tokens=50)
    batcher.submit(running)
    batcher.step()
    batcher.submit(seq())
    batcher.step()
    assert batcher.regroups == 0 and running.completion_tokens == 2
