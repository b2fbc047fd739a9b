"""A model that runs in its device's engine worker, as the daemon's requests see it.

The daemon keeps its own `Sequence` per generation (prompt, params, what came back) and an
asyncio future per embeddings job; the worker keeps the real ones. A `Step` from the worker
becomes each sequence's deltas, on the event loop, in one go. A submit waits for the worker's
answer, so the context-length 400 and the queue-full 503 still come before a stream starts.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections import Counter
from typing import Any

import numpy as np

from localserve.engine.batching.outputs import Outbox
from localserve.engine.batching.sequence import Delta, Sequence, Status
from localserve.engine.workers.connection import WorkerProcess
from localserve.ground import messages as m
from localserve.ground.errors import EngineStopped
from localserve.ground.model import ModelInfo
from localserve.ground.sampling import SamplingParams

_jobs = itertools.count(1)


class RemoteRunner:
    """One model's batcher inside a worker (engine/workers/runner.py's Runner)."""

    def __init__(self, worker: WorkerProcess, info: ModelInfo, n_vocab: int) -> None:
        self.worker = worker
        self.info = info
        self._n_vocab = n_vocab
        self.sequences: dict[int, Sequence] = {}
        self.jobs: dict[int, asyncio.Future[list[np.ndarray]]] = {}
        self._load = m.ModelLoad(0, 0, 0)
        self.batch_sizes: Counter[int] = Counter()  # sequences with news in a step: steps

    @property
    def name(self) -> str:
        return self.info.name

    @property
    def n_vocab(self) -> int:
        return self._n_vocab

    @property
    def busy(self) -> int:
        # What the daemon still waits for; a cancelled request is reaped at the worker's next
        # step, and an unload waits for a step in progress there.
        return len(self.sequences) + len(self.jobs)

    def tokenize(self, texts: list[str], add_special: bool) -> list[list[int]]:
        return self.worker.ask(m.Tokenize(0, self.name, texts, add_special))  # type: ignore[no-any-return]

    async def start(
        self, prompt: list[int], params: SamplingParams, max_new: int, prompt_field: str
    ) -> Sequence:
        seq = Sequence(prompt, params, max_new, self)
        self.sequences[seq.id] = seq
        ask = m.Submit(0, self.name, seq.id, prompt, params, max_new, prompt_field)
        try:
            await asyncio.wrap_future(self.worker.send(ask))
        except BaseException:
            self.sequences.pop(seq.id, None)
            raise
        return seq

    def cancel(self, seq: Sequence) -> None:
        if self.sequences.pop(seq.id, None) is not None:
            seq.status = Status.FINISHED
            self.worker.tell(m.Cancel(self.name, seq=seq.id))

    async def embed(self, model: str, inputs: list[list[int]]) -> list[np.ndarray]:
        job = next(_jobs)
        future: asyncio.Future[list[np.ndarray]] = asyncio.get_running_loop().create_future()
        self.jobs[job] = future
        try:
            await asyncio.wrap_future(self.worker.send(m.Embed(0, self.name, job, inputs)))
            return await future
        finally:
            if self.jobs.pop(job, None) is not None:  # the client left before the vectors came
                self.worker.tell(m.Cancel(self.name, job=job))

    def stats(self) -> dict[str, Any]:
        load = self._load
        return {"queued": load.waiting, "running": load.running, "prompt_cache": load.prompt_cache,
                "batch_sizes": dict(self.batch_sizes)}

    # -- from the worker, on the event loop --------------------------------------------------

    def stepped(self, outputs: list[m.Output], load: m.ModelLoad) -> None:
        self._load = load
        self.batch_sizes[len(outputs)] += 1
        now = time.monotonic()
        items: Outbox = []
        for out in outputs:
            seq = self.sequences.get(out.seq)
            if seq is None:
                continue  # cancelled here already
            if out.tokens:
                seq.first_token_at = seq.first_token_at or now
                seq.generated.extend(out.tokens)
                seq.status = Status.RUNNING
            seq.cached_tokens, seq.queued_s = out.cached_tokens, out.queued_s
            if out.finish_reason is not None:
                seq.finish_reason, seq.stop_sequence = out.finish_reason, out.stop_sequence
                seq.finished_at = now
                seq.status = Status.FINISHED
                del self.sequences[out.seq]
            items.append((seq, Delta(out.text, out.finish_reason, out.error)))
        self.put(items)

    def embedded(self, message: m.Embedded) -> None:
        future = self.jobs.pop(message.job, None)
        if future is None or future.done():
            return
        if message.error is not None:
            future.set_exception(RuntimeError(message.error))
        else:
            future.set_result([np.frombuffer(v, np.float32) for v in message.vectors])

    def lost(self, error: EngineStopped) -> None:
        """The worker died: every request of this model ends now, with `error`."""
        items: Outbox = []
        for seq in self.sequences.values():
            seq.finish_reason, seq.status = "error", Status.FINISHED
            items.append((seq, Delta("", finish_reason="error", error=str(error))))
        self.sequences.clear()
        self.put(items)
        for future in self.jobs.values():
            if not future.done():
                future.set_exception(error)
        self.jobs.clear()

    # -- the sink of the daemon's own sequences ----------------------------------------------

    def put(self, items: Outbox) -> None:
        for seq, delta in items:
            seq.outputs.put_nowait(delta)
