"""Embeddings in the batcher, specified with a fake backend (pure logic: no kernels involved).

The fake's hidden state for a token is a row filled with the token id, so pooled vectors are
easy to predict: mean pooling of tokens [2, 4] gives a row of 3s.
"""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

from localserve.engine.batching.embedding import EmbeddingJob
from localserve.engine.batching.scheduler import Scheduler
from localserve.engine.batching.sequence import Sequence
from localserve.engine.worker_client.resident import ResidentModel
from localserve.formats.gguf import embedding_rows
from localserve.ground.errors import BadRequest, ContextOverflow
from localserve.ground.sampling import SamplingParams
from localserve.ground.step import StepPlan
from localserve.server.embeddings import normalize, shorten
from tests.support.fakes import WIDTH, FakeBackend, LocalRunner


class GenerateOnlyBackend(FakeBackend):
    """A backend with no `embed`, as a runtime that cannot return hidden states."""

    embed = None  # type: ignore[assignment]


@pytest.fixture
def loop() -> asyncio.AbstractEventLoop:
    loop = asyncio.new_event_loop()
    yield loop
    loop.close()


def run_until_done(sched: Scheduler, loop: asyncio.AbstractEventLoop, *jobs: EmbeddingJob):
    """Step until the jobs are done; the vectors of each, as the steps that finished it said."""
    done: dict[int, list] = {}
    while sched.has_work():
        for job, error in sched.step().embedded:
            assert error is None
            done[id(job)] = list(job.vectors)
    return [done[id(job)] for job in jobs]


def embed_calls(backend: FakeBackend) -> list[StepPlan]:
    return [plan for kind, plan in backend.calls if kind == "embed"]


def test_inputs_of_one_request_and_of_concurrent_requests_share_one_decode(loop) -> None:
    backend = FakeBackend(n_slots=4)
    sched = Scheduler(backend, step_tokens=64)
    first = EmbeddingJob([[2, 4], [6]])
    second = EmbeddingJob([[8, 8, 8]])
    sched.submit_embedding(first)
    sched.submit_embedding(second)
    a, b = run_until_done(sched, loop, first, second)
    assert len(embed_calls(backend)) == 1
    assert [v.tolist() for v in a] == [[3, 3, 3], [6, 6, 6]]
    assert b[0].tolist() == [8, 8, 8]


def test_an_input_longer_than_an_embedding_step_continues_in_the_next_one(loop) -> None:
    backend = FakeBackend(n_slots=2)
    sched = Scheduler(backend, step_tokens=4)  # 4 rows per embedding step
    job = EmbeddingJob([[1, 2, 3, 4, 5, 6, 7, 8, 9]])
    sched.submit_embedding(job)
    (vectors,) = run_until_done(sched, loop, job)
    plans = embed_calls(backend)
    assert [c.start_pos for p in plans for c in p.chunks] == [0, 4, 8]
    assert vectors[0].tolist() == [5, 5, 5]  # the mean over all nine tokens, not the last chunk


@pytest.mark.parametrize("pooling, expected", [("cls", 1), ("last", 9), ("mean", 5)])
def test_the_model_pooling_type_chooses_the_row(loop, pooling: str, expected: int) -> None:
    backend = FakeBackend(n_slots=1)
    backend.pooling = pooling
    sched = Scheduler(backend, step_tokens=4)
    job = EmbeddingJob([[1, 2, 3, 4, 5, 6, 7, 8, 9]])
    sched.submit_embedding(job)
    (vectors,) = run_until_done(sched, loop, job)
    assert vectors[0].tolist() == [expected] * WIDTH


def test_chunks_of_an_embedding_step_are_in_ascending_slot_order(loop) -> None:
    backend = FakeBackend(n_slots=4)
    sched = Scheduler(backend, step_tokens=64)
    sched.slots.free = [2, 0, 3, 1]
    job = EmbeddingJob([[1], [2], [3], [4]])
    sched.submit_embedding(job)
    run_until_done(sched, loop, job)
    (plan,) = embed_calls(backend)
    assert [c.slot for c in plan.chunks] == [0, 1, 2, 3]


def test_more_inputs_than_slots_wait_for_slots_and_all_come_back_in_order(loop) -> None:
    backend = FakeBackend(n_slots=2)
    sched = Scheduler(backend, step_tokens=64)
    job = EmbeddingJob([[i] for i in range(1, 6)])
    sched.submit_embedding(job)
    (vectors,) = run_until_done(sched, loop, job)
    assert [v[0] for v in vectors] == [1, 2, 3, 4, 5]
    assert len(embed_calls(backend)) == 3
    assert sorted(sched.slots.free) == [0, 1]


def test_a_slot_returned_by_an_embedding_holds_its_tokens_for_prefix_reuse(loop) -> None:
    backend = FakeBackend(n_slots=1)
    sched = Scheduler(backend, step_tokens=64)
    job = EmbeddingJob([[5, 6, 7]])
    sched.submit_embedding(job)
    run_until_done(sched, loop, job)
    assert sched.slots.tokens[0] == [5, 6, 7]


def test_embedding_and_generation_steps_take_turns(loop) -> None:
    backend = FakeBackend(n_slots=4)
    sched = Scheduler(backend, step_tokens=2)
    sched.submit(Sequence([1], SamplingParams(temperature=0), 5))
    sched.submit_embedding(EmbeddingJob([[1, 2, 3, 4, 5, 6]]))
    for _ in range(4):
        sched.step()
    assert [kind for kind, _ in backend.calls] == ["generate", "embed", "generate", "embed"]


def test_an_input_longer_than_a_slot_context_is_refused_at_once(loop) -> None:
    sched = Scheduler(FakeBackend(n_ctx=8), step_tokens=64)
    with pytest.raises(ContextOverflow):
        sched.submit_embedding(EmbeddingJob([[1] * 9]))


def test_a_backend_that_cannot_embed_answers_a_clear_bad_request(loop) -> None:
    sched = Scheduler(GenerateOnlyBackend(), step_tokens=64)
    with pytest.raises(BadRequest, match="model 'fake' does not support embeddings"):
        sched.submit_embedding(EmbeddingJob([[1]]))


def test_a_batcher_without_embeddings_answers_a_clear_bad_request(loop) -> None:
    class GenerationOnlyBatcher:
        waiting: list = []
        running: list = []
        busy = 0

    backend = FakeBackend()
    runner = LocalRunner(backend, GenerationOnlyBatcher())  # type: ignore[arg-type]
    model = ResidentModel(backend.info, runner, "cpu")
    with pytest.raises(BadRequest, match="does not support embeddings"):
        loop.run_until_complete(model.embed([[1]]))


def test_embedding_rows_are_bounded_by_the_output_buffer_but_never_below_the_slots() -> None:
    assert embedding_rows(n_vocab=49152, n_embd=576, n_slots=16, step_tokens=512) == 84
    assert embedding_rows(n_vocab=262144, n_embd=640, n_slots=16, step_tokens=512) == 16
    assert embedding_rows(n_vocab=100, n_embd=3, n_slots=2, step_tokens=32) == 32


def test_dimensions_keep_the_leading_components_at_unit_length() -> None:
    vec = normalize(np.array([3.0, 4.0, 12.0]))
    assert np.allclose(shorten(vec, 2), [0.6, 0.8])
    assert shorten(vec, None) is vec
