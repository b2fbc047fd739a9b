"""Embedding inputs inside a model's batcher: they wait for a slot, run, and are pooled.

An embedding step is a decode of its own (llama.cpp's embeddings mode is a property of the
context, not of a sequence), taken in turn with generation steps by the `Scheduler`, which owns
the lane and decides whose turn it is. One step fills a single batch with as many inputs as
there are free slots and rows in its budget, so the inputs of one request and of concurrent
requests share decode calls. An input longer than the budget continues in the next embedding
step from its KV cells, as a chunked prefill does. The KV cache is the one allocated at load:
an input only borrows a free slot from the model's `Slots`.
"""

from __future__ import annotations

import logging

import numpy as np

from localserve.backends.base import EmbeddingBackend
from localserve.engine.batching.admission import AdmissionQueue
from localserve.engine.batching.embedding import EmbeddingInput, EmbeddingJob
from localserve.engine.batching.outputs import StepResult
from localserve.engine.batching.slots import Slots
from localserve.formats.gguf import embedding_rows
from localserve.ground.step import StepChunk, StepPlan

log = logging.getLogger(__name__)


class EmbeddingLane:
    """The embedding inputs of one model: waiting for a slot, and running in one."""

    def __init__(
        self, backend: EmbeddingBackend, slots: Slots, step_tokens: int, max_waiting: int
    ) -> None:
        self.backend = backend
        self.slots = slots
        info = slots.backend.info
        self.name = info.name
        self.rows = embedding_rows(slots.backend.n_vocab, info.n_embd, info.n_slots, step_tokens)
        # Counted in inputs; a request is always taken when nothing waits, however many it has.
        self.waiting: AdmissionQueue[EmbeddingInput] = AdmissionQueue(
            info.name,
            max_waiting * info.n_slots,
            info.n_ctx_slot,
            background=lambda item: item.job.background,
        )
        self.running: list[EmbeddingInput] = []

    # -- called from the worker's main thread, as the daemon asks ----------------------------

    def submit(self, job: EmbeddingJob) -> None:
        self.waiting.submit(job.inputs(), "input")

    @property
    def busy(self) -> int:
        return len(self.running) + len(self.waiting)

    # -- called from the engine thread -------------------------------------------------------

    def has_work(self) -> bool:
        return bool(self.running or self.waiting)

    @property
    def background_only(self) -> bool:
        """Whether every input running or waiting belongs to a background job."""
        return not self.waiting.count(background=False) and all(
            item.job.background for item in self.running
        )

    def step(self) -> StepResult:
        result = StepResult()
        self._reap_cancelled()
        self._admit()
        plan, inputs = self._plan()
        if not plan.chunks:
            return result
        try:
            rows = self.backend.embed(plan)
        except Exception as exc:  # a kernel failure fails the jobs in this step, not the daemon
            log.exception("embedding step failed for model %s", self.name)
            self._fail({inp.job for inp in inputs}, exc, result)
            return result
        self.slots.tick()
        self._postprocess(plan, inputs, rows, result)
        return result

    def _reap_cancelled(self) -> None:
        for inp in [i for i in self.running if i.cancelled]:
            self._release(inp)
        self.waiting.reap()

    def _admit(self) -> None:
        budget = self.rows - sum(i.remaining for i in self.running)
        while budget > 0 and self.slots.free and (inp := self.waiting.take()) is not None:
            inp.slot = self.slots.lend()
            self.running.append(inp)
            budget -= inp.remaining

    def _plan(self) -> tuple[StepPlan, list[EmbeddingInput]]:
        plan = StepPlan()
        inputs: list[EmbeddingInput] = []
        budget = self.rows
        # Ascending slots: llama.cpp runs one micro-batch per run of consecutive sequence ids.
        for inp in sorted(self.running, key=lambda i: i.slot or 0):
            if budget <= 0:
                break
            assert inp.slot is not None
            take = min(inp.remaining, budget)
            start = inp.n_done
            plan.chunks.append(StepChunk(inp.slot, inp.tokens[start : start + take], start, False))
            inputs.append(inp)
            budget -= take
        return plan, inputs

    def _postprocess(
        self, plan: StepPlan, inputs: list[EmbeddingInput], rows: np.ndarray, result: StepResult
    ) -> None:
        pooling = self.backend.pooling
        done: set[EmbeddingJob] = set()
        at = 0
        for chunk, inp in zip(plan.chunks, inputs):
            n = len(chunk.tokens)
            inp.take(rows[at : at + n], pooling)
            at += n
            if inp.remaining == 0:
                inp.job.vectors[inp.index] = inp.vector(pooling)
                self._release(inp)
                if inp.job.complete:
                    done.add(inp.job)
        result.embedded += [(job, None) for job in done]

    def _release(self, inp: EmbeddingInput, kv_valid: bool = True) -> None:
        assert inp.slot is not None
        # The cells hold exactly the tokens run so far: a later prompt may reuse them. A failed
        # batch's cells are trusted not at all.
        self.slots.put_back(inp.slot, inp.tokens[: inp.n_done] if kv_valid else None)
        inp.slot = None
        self.running.remove(inp)

    def _fail(self, jobs: set[EmbeddingJob], exc: Exception, result: StepResult) -> None:
        for inp in [i for i in self.running if i.job in jobs]:
            self._release(inp, kv_valid=False)
        self.waiting.drop(lambda i: i.job in jobs)
        error = RuntimeError(f"embedding failed: {exc}")
        result.embedded += [(job, error) for job in jobs]
