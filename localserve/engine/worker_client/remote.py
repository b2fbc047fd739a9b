"""A model that runs in its device's engine worker, as the daemon's requests see it.

The daemon keeps a `RequestStream` per generation (engine/worker_client/stream.py) and an asyncio
future per embeddings job; the worker keeps the sequences and jobs themselves. A `Step` from the
worker hands each stream its `Output`, on the event loop, in one go. A submit is one round trip:
the worker tokenizes the prompt text (or takes its tokens), checks it and queues it, and its
answer carries the prompt's length, so the context-length 400 and the queue-full 503 still come
before a stream starts.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections import Counter
from typing import Any

import msgspec
import numpy as np

from localserve.engine.worker_client.connection import WorkerProcess
from localserve.engine.worker_client.stream import RequestStream
from localserve.ground import messages as m
from localserve.ground.errors import EngineStopped
from localserve.ground.model import ModelInfo
from localserve.ground.sampling import SamplingParams

_jobs = itertools.count(1)


class RemoteRunner:
    """One model's batcher inside a worker (engine/worker_client/runner.py's Runner)."""

    def __init__(self, worker: WorkerProcess, info: ModelInfo, n_vocab: int) -> None:
        self.worker = worker
        self.info = info
        self._n_vocab = n_vocab
        self.sequences: dict[int, RequestStream] = {}
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
        self,
        prompt: list[int] | str,
        params: SamplingParams,
        prompt_field: str,
        add_special: bool = False,
        want_tokens: bool = False,
    ) -> RequestStream:
        stream = RequestStream(params)
        self.sequences[stream.id] = stream
        tokens, text = (prompt, "") if isinstance(prompt, list) else ([], prompt)
        ask = m.Submit(
            0, self.name, stream.id, params, prompt_field, tokens, text, add_special, want_tokens
        )
        try:
            submitted = msgspec.convert(
                await asyncio.wrap_future(self.worker.send(ask)), m.Submitted
            )
        except BaseException:
            # A client that left while the worker took the submit: the worker may run it.
            if self.sequences.pop(stream.id, None) is not None:
                self.worker.tell(m.Cancel(self.name, seq=stream.id))
            raise
        stream.prompt_tokens = submitted.prompt_tokens
        stream.prompt = tokens or submitted.tokens
        return stream

    def cancel(self, stream: RequestStream) -> None:
        if self.sequences.pop(stream.id, None) is not None:
            self.worker.tell(m.Cancel(self.name, seq=stream.id))

    async def embed(
        self, model: str, inputs: list[list[int]], background: bool = False
    ) -> list[np.ndarray]:
        job = next(_jobs)
        future: asyncio.Future[list[np.ndarray]] = asyncio.get_running_loop().create_future()
        self.jobs[job] = future
        try:
            await asyncio.wrap_future(
                self.worker.send(m.Embed(0, self.name, job, inputs, background))
            )
            return await future
        finally:
            if self.jobs.pop(job, None) is not None:  # the client left before the vectors came
                self.worker.tell(m.Cancel(self.name, job=job))

    def stats(self) -> dict[str, Any]:
        load = self._load
        return {
            "queued": load.waiting,
            "running": load.running,
            "prompt_cache": load.prompt_cache,
            "speculation": load.speculation,
            "preemptions": load.preemptions,
            "batch_sizes": dict(self.batch_sizes),
        }

    # -- from the worker, on the event loop --------------------------------------------------

    def stepped(self, outputs: list[m.Output], load: m.ModelLoad) -> None:
        self._load = load
        self.batch_sizes[len(outputs)] += 1
        now = time.monotonic()
        for out in outputs:
            stream = self.sequences.get(out.seq)
            if stream is None:
                continue  # cancelled here already
            if out.finish_reason is not None:
                del self.sequences[out.seq]
            stream.took(out, now)

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
        streams, self.sequences = self.sequences, {}
        for stream in streams.values():
            stream.end("error", str(error))
        for future in self.jobs.values():
            if not future.done():
                future.set_exception(error)
        self.jobs.clear()
