"""The engine worker: one process per device, owning its engine loop and every model on it.

`python -m localserve.engine.worker_process.main --device cpu --fd N --settings JSON` serves
the daemon over the socket `N` (ground/messages.py). The main thread reads asks and answers
them; loads and unloads run on threads of their own so that a load of seconds never holds up
the submits of the models already serving, and so do the asks that may take long (a long text,
a grammar to compile: slow_asks.py); the device's engine thread steps every resident model in
turn and sends one `Step` per step. A native fault here (SIGILL, an abort, a segfault,
the OOM killer) ends this process only: the daemon sees the socket close and tells the requests
in flight.

The worker exits when the daemon's end of the socket closes, so it never outlives the daemon.
"""

from __future__ import annotations

import argparse
import faulthandler
import logging
import os
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import msgspec
import numpy as np
import psutil

from localserve.engine.batching.batcher import Batcher, Embedder, Spiller
from localserve.engine.batching.embedding import EmbeddingJob
from localserve.engine.batching.sequence import Sequence
from localserve.engine.worker_process.device_loop import DeviceLoop
from localserve.engine.worker_process.faults import SERVING_FAULTS, Fault
from localserve.engine.worker_process.runtimes import Built, build_model
from localserve.engine.worker_process.slow_asks import SlowLane, may_take_long
from localserve.ground import messages as m
from localserve.ground.errors import BadRequest, ContextOverflow, EngineError, ModelNotFound
from localserve.ground.settings import Settings
from localserve.ground.token_floor import check_fits

log = logging.getLogger("localserve.worker")


class Connection:
    """The worker's end of the socket: whole frames in, whole frames out, sends serialized."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self._send_lock = threading.Lock()
        self._encoder = msgspec.msgpack.Encoder()
        self._decoder: msgspec.msgpack.Decoder[m.ToWorker] = msgspec.msgpack.Decoder(m.ToWorker)

    def send(self, message: msgspec.Struct) -> None:
        data = m.frame(message, self._encoder)
        try:
            with self._send_lock:
                self.sock.sendall(data)
        except OSError:
            pass  # the daemon is gone; the main thread sees the socket close and we exit

    def receive(self) -> m.ToWorker | None:
        try:
            return m.read_frame(self.sock, self._decoder)
        except OSError:  # reset: the daemon died
            return None


class ResidentBatcher:
    """A model's batcher as the device loop steps it: each step's result goes to the daemon
    as one `Step` (and an `Embedded` per embeddings job it completed)."""

    def __init__(self, worker: Worker, name: str, built: Built) -> None:
        self.worker = worker
        self.name = name
        self.built = built
        self.batcher: Batcher = built.batcher
        self.users = 0  # asks reading its backend now: its unload waits for them (Worker._using)

    def attach(self, wake: Callable[[], None]) -> None:
        self.batcher.attach(wake)

    def has_work(self) -> bool:
        return self.batcher.has_work()

    def step(self) -> None:
        self.worker.count_step(self.name)
        result = self.batcher.step()
        outputs = []
        for seq, delta in result.outputs:
            new = seq.generated[seq.reported :]
            seq.reported = len(seq.generated)
            outputs.append(
                m.Output(
                    seq.id,
                    delta.text,
                    new,
                    delta.finish_reason,
                    delta.error,
                    seq.cached_tokens,
                    seq.queued_s,
                    seq.stop_sequence,
                )
            )
            if delta.finish_reason is not None:
                self.worker.forget(self.name, seq.id)
        batcher = self.batcher
        cache = getattr(batcher, "prompt_cache", None)
        speculation = getattr(batcher, "speculation", None)
        load = m.ModelLoad(
            len(batcher.waiting),
            len(batcher.running),
            batcher.busy,
            cache.stats() if cache is not None else None,
            speculation() if speculation is not None else None,
            getattr(batcher, "preemptions", 0),
        )
        self.worker.conn.send(m.Step(self.name, outputs, load))
        for job, error in result.embedded:
            vectors = [] if error else [np.asarray(v, np.float32).tobytes() for v in job.vectors]
            self.worker.conn.send(
                m.Embedded(self.name, job.id, vectors, str(error) if error else None)
            )
            self.worker.forget_job(self.name, job.id)


class Worker:
    """Every model of one device, the device loop that steps them, and the daemon's socket."""

    def __init__(self, device: str, settings: Settings, conn: Connection) -> None:
        self.device = device
        self.settings = settings
        self.conn = conn
        self.loop = DeviceLoop(device)
        self.models: dict[str, ResidentBatcher] = {}
        self._sequences: dict[tuple[str, int], Sequence] = {}
        self._jobs: dict[tuple[str, int], EmbeddingJob] = {}
        self._lock = threading.Lock()
        self._idle = threading.Condition(self._lock)  # a model's last ask done with it
        self._slow = SlowLane()  # long tokenizing and compiles, off the main thread
        self._steps = 0
        self._fault = Fault.from_env(os.environ)  # off unless a test sets it
        self._extra_bufts_models: set[str] = set()
        # Models whose unload (and its writing of their conversations) has not finished: a load
        # of the same model waits for it, so it finds every conversation saved.
        self._unloading: dict[str, threading.Event] = {}

    def serve(self) -> None:
        self.loop.start()
        while (message := self.conn.receive()) is not None:
            self.handle(message)

    def handle(self, message: m.ToWorker) -> None:
        if isinstance(message, m.Load):
            self._in_thread(message.ref, lambda: self._load(message))
        elif isinstance(message, m.Unload):
            # Marked before its thread starts: a load sent after it must find it in progress.
            done = self._unloading[message.model] = threading.Event()
            self._in_thread(message.ref, lambda: self._unload(message.model, done))
        elif isinstance(message, m.Tokenize):
            self._answer_by_cost(message, lambda: self._tokenize(message))
        elif isinstance(message, m.Submit):
            self._answer_by_cost(message, lambda: self._submit(message))
        elif isinstance(message, m.Embed):
            self._answer(message.ref, lambda: self._embed(message))
        elif isinstance(message, m.Cancel):
            self._cancel(message)
        elif isinstance(message, m.Stats):
            self._answer(message.ref, self._stats)

    # -- asks --------------------------------------------------------------------------------

    def _load(self, message: m.Load) -> m.Loaded:
        ref = message.model
        if (unloading := self._unloading.get(ref.name)) is not None:
            unloading.wait()
        rss_before = psutil.Process().memory_info().rss
        t0 = time.perf_counter()
        built = build_model(self.settings, message)
        resident = ResidentBatcher(self, ref.name, built)
        loaded = m.Loaded(
            built.backend.info,
            built.backend.n_vocab,
            built.reported_bytes,
            psutil.Process().memory_info().rss - rss_before,
            time.perf_counter() - t0,
            built.buffers,
        )
        if message.use_extra_bufts:
            self._extra_bufts_models.add(ref.name)
        with self._lock:
            self.models[ref.name] = resident
        self.loop.add(resident)
        log.info("loaded %s in %.2fs", ref.name, loaded.load_seconds)
        return loaded

    def _unload(self, name: str, done: threading.Event) -> None:
        try:
            with self._lock:
                resident = self.models.pop(name, None)
                # An ask still reading its vocabulary (a slow tokenizing) would read freed memory.
                while resident is not None and resident.users:
                    self._idle.wait()
            if resident is not None:
                self._close(name, resident)
        finally:
            if self._unloading.get(name) is done:
                del self._unloading[name]
            done.set()

    def _close(self, name: str, resident: ResidentBatcher) -> None:
        self.loop.remove(resident)  # waits for a step in progress
        if isinstance(resident.batcher, Spiller):
            t0 = time.perf_counter()
            try:
                n = resident.batcher.save_conversations()
            except Exception:  # the model still unloads; its conversations prefill next time
                log.exception("could not save the conversations of %s", name)
            else:
                log.info("saved %d conversations of %s in %.2fs", n, name, time.perf_counter() - t0)
        resident.built.backend.close()
        self._extra_bufts_models.discard(name)

    def _tokenize(self, message: m.Tokenize) -> list[list[int]]:
        with self._using(message.model) as resident:
            backend = resident.built.backend
            return [backend.tokenize(text, message.add_special) for text in message.texts]

    def _submit(self, message: m.Submit) -> m.Submitted:
        key = (message.model, message.seq)
        try:
            with self._using(message.model) as resident:
                return self._queue(resident, message)
        finally:
            with self._lock:
                self._slow.done(key)

    def _queue(self, resident: ResidentBatcher, message: m.Submit) -> m.Submitted:
        backend = resident.built.backend
        n_ctx, field = backend.info.n_ctx_slot, message.prompt_field
        prompt = message.prompt
        if not prompt:
            # A text that cannot fit, whatever its tokens, is refused before it is read
            # (ground/token_floor.py): 16 MiB took a worker thread 14 to 35 s to tokenize.
            check_fits(backend.info.token_floor, message.text, n_ctx, 1, field)
            prompt = backend.tokenize(message.text, message.add_special)
        if not prompt:
            raise BadRequest("the prompt is empty", field)
        # The batcher's admission refuses the same (a slot keeps a cell for the first new
        # token): checked first here, so that a prompt that cannot fit compiles no grammar.
        if len(prompt) + 1 > n_ctx:
            raise ContextOverflow(len(prompt), n_ctx, field)
        # What the backend's sampler cannot honour is a 400 naming the field, before the
        # Submitted reply, so before anything streams.
        backend.check_sampling(message.params)
        cap = message.params.answer_cap(len(prompt), n_ctx)
        seq = Sequence(prompt, message.params, cap)
        seq.id = message.seq
        with self._lock:
            if (message.model, seq.id) in self._slow.cancelled_early:
                raise EngineError("the client left before its prompt was queued")
            self._sequences[(message.model, seq.id)] = seq
        try:
            resident.batcher.submit(seq, message.prompt_field)
        except BaseException:
            self.forget(message.model, seq.id)
            raise
        return m.Submitted(len(prompt), prompt if message.want_tokens else [])

    def _embed(self, message: m.Embed) -> None:
        with self._using(message.model) as resident:
            batcher = resident.batcher
            if not isinstance(batcher, Embedder):
                raise BadRequest(f"model '{message.model}' does not support embeddings", "model")
            job = EmbeddingJob(message.inputs, id=message.job, background=message.background)
            with self._lock:
                self._jobs[(message.model, job.id)] = job
            try:
                batcher.submit_embedding(job)
            except BaseException:
                self.forget_job(message.model, job.id)
                raise

    def _cancel(self, message: m.Cancel) -> None:
        with self._lock:
            resident = self.models.get(message.model)
            key = (message.model, message.seq)
            request: Any = (
                self._sequences.pop(key, None)
                if message.seq
                else self._jobs.pop((message.model, message.job), None)
            )
            if message.seq and request is None:
                self._slow.cancel_early(key)  # its submit, on a slow thread, queues nothing
        if resident is not None and request is not None:
            resident.batcher.cancel(request)

    def _stats(self) -> dict[str, Any]:
        from localserve_native.verdicts import build_key  # loads llama.cpp, as loads do

        return {
            "device": self.device,
            "pid": os.getpid(),
            "models": sorted(self.models),
            "build_key": build_key(),
        }

    # -- bookkeeping -------------------------------------------------------------------------

    def forget(self, model: str, seq: int) -> None:
        with self._lock:
            self._sequences.pop((model, seq), None)

    def forget_job(self, model: str, job: int) -> None:
        with self._lock:
            self._jobs.pop((model, job), None)

    def count_step(self, model: str) -> None:
        # The probe's steps are the kernels' verdict and timing: a fault that stands for a
        # served model's step (an abort, a slow prefill) must not take them.
        if model == m.PROBE_MODEL and self._fault.kind in SERVING_FAULTS:
            return
        self._steps += 1
        if self._fault.kind:
            self._fault.at(self._steps, bool(self._extra_bufts_models))

    @contextmanager
    def _using(self, name: str) -> Iterator[ResidentBatcher]:
        """The model, its backend kept open (an unload waits) until the ask is done with it."""
        with self._lock:
            resident = self.models.get(name)
            if resident is None:
                raise ModelNotFound(name, f"it is not loaded on the {self.device} engine")
            resident.users += 1
        try:
            yield resident
        finally:
            with self._lock:
                resident.users -= 1
                if not resident.users:
                    self._idle.notify_all()

    def _answer(self, ref: int, ask: Callable[[], Any]) -> None:
        try:
            value = ask()
        except Exception as exc:  # the daemon raises it again, as the same kind of error
            if not isinstance(exc, EngineError):
                log.exception("failed: %s", exc)
            self.conn.send(m.Reply(ref, error=failure(exc)))
        else:
            self.conn.send(m.Reply(ref, value))

    def _answer_by_cost(self, message: m.Tokenize | m.Submit, ask: Callable[[], Any]) -> None:
        """Answer now, or on a slow thread when the ask may take long (slow_asks.py)."""
        if not may_take_long(message):
            self._answer(message.ref, ask)
            return
        if isinstance(message, m.Submit):
            with self._lock:
                self._slow.submitting.add((message.model, message.seq))
        self._slow.submit(lambda: self._answer(message.ref, ask))

    def _in_thread(self, ref: int, ask: Callable[[], Any]) -> None:
        threading.Thread(target=self._answer, args=(ref, ask), daemon=True).start()


def failure(exc: BaseException) -> m.Failure:
    """An error as the daemon rebuilds it: its kind, its message, what the face needs of it."""
    extra = {k: v for k, v in vars(exc).items() if isinstance(v, (int, str)) and k != "param"}
    return m.Failure(type(exc).__name__, str(exc), getattr(exc, "param", None), extra)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="localserve-worker")
    p.add_argument("--device", required=True)
    p.add_argument("--fd", type=int, required=True)
    p.add_argument("--settings", required=True, help="the daemon's Settings, as JSON")
    args = p.parse_args(argv)
    logging.basicConfig(
        level=logging.INFO, format=f"%(asctime)s %(levelname)s {args.device}-worker: %(message)s"
    )
    # A native fault prints the faulting thread's Python stack into the log before we die
    # (only that thread's: walking the others while they run can itself crash).
    faulthandler.enable(file=sys.stderr, all_threads=False)
    # Ctrl-C in the daemon's terminal reaches us too: the daemon decides when we stop.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    settings = msgspec.json.decode(args.settings.encode(), type=Settings)
    sock = socket.socket(fileno=args.fd)
    Worker(args.device, settings, Connection(sock)).serve()
    return 0


if __name__ == "__main__":
    sys.exit(main())
