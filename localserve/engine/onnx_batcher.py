"""The dynamic batcher of one onnxruntime-genai model: which requests form the next batch.

On the CPU, onnxruntime-genai's Engine runs static batches: a batch runs until its last request
ends, and requests added meanwhile wait for the next one. This batcher decides when a batch
starts and who is in it, with a per-model policy (the BentoML / Triton knobs):

- `max_batch_size` rows per batch;
- `max_queue_delay_ms`: when the model is idle and a request arrives, wait this long for others
  to join it (a full batch starts at once);
- `max_waiting`: the queue's length; past it a request is refused at once (QueueFull).

Requests that arrive while a batch runs wait in our queue and form the next batch. Each step is
one Engine step for the whole batch; every sequence's new token goes through the same
post-processing as the GGUF scheduler's (engine/outputs.py), so a finished sequence streams its
end at once and never waits for the batch's slowest. Where the Engine batches dynamically (a
paged KV cache on CUDA or WebGPU), requests go to it as soon as a row is free.

`regroup_at` (off by default) ends a static batch early when only that many rows still run and
a full batch's worth of requests waits: the stragglers rejoin the queue's head and continue from
their prompt plus what they generated, which costs one prefill of that text.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from dataclasses import dataclass
from typing import Any, Callable

from localserve.backends.onnx_genai import OnnxGenaiBackend
from localserve.engine.batcher import enqueue
from localserve.engine.outputs import Outbox, accept_token, deliver, drain, end_sequence
from localserve.engine.sequence import Delta, Sequence, Status

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class BatchPolicy:
    max_batch_size: int = 8
    max_queue_delay_ms: float = 10.0
    max_waiting: int = 64
    regroup_at: int = 0


@dataclass
class _Row:
    """A sequence's request in the Engine."""

    request: Any
    turn: int


class OnnxBatcher:
    """Waiting and running sequences of one ONNX model, stepped by its device's engine loop."""

    def __init__(self, backend: OnnxGenaiBackend, policy: BatchPolicy) -> None:
        self.backend = backend
        self.policy = policy
        self.max_batch_size = max(1, min(policy.max_batch_size, backend.max_batch_size))
        self.continuous = backend.continuous
        self.waiting: deque[Sequence] = deque()
        self.running: list[Sequence] = []
        self._rows: dict[int, _Row] = {}  # by Sequence.id
        self._by_request: dict[int, Sequence] = {}  # by id() of the row's live og.Request
        self._engine: Any = None
        self._events: Any = None
        self._lock = threading.Lock()
        self._wake: Callable[[], None] = lambda: None
        self._timer: threading.Timer | None = None
        # What the benchmark and /api/ps may want to know.
        self.steps = 0
        self.batches = 0
        self.regroups = 0

    # -- called from the event loop ----------------------------------------------------------

    def attach(self, wake: Callable[[], None]) -> None:
        self._wake = wake

    def submit(self, seq: Sequence, prompt_field: str = "prompt") -> None:
        enqueue(self.waiting, self._lock, seq, self.policy.max_waiting, self.backend.info, prompt_field)
        self._wake()
        self._arm_timer()

    def cancel(self, seq: Sequence) -> None:
        seq.cancel()
        with self._lock:
            if seq in self.waiting:  # never started: nothing to free but its place in line
                self.waiting.remove(seq)
                seq.status = Status.FINISHED
                seq.finish_reason = "cancelled"
        self._wake()

    @property
    def busy(self) -> int:
        return len(self.running) + len(self.waiting)

    def _arm_timer(self) -> None:
        """Wake the engine loop when the oldest waiting request's delay runs out."""
        delay = self._seconds_until_start()
        if delay is None or delay <= 0 or self._timer is not None:
            return
        timer = threading.Timer(delay, self._timer_fired)
        timer.daemon = True
        self._timer = timer
        timer.start()

    def _timer_fired(self) -> None:
        self._timer = None
        self._wake()

    # -- called from the engine thread -------------------------------------------------------

    def has_work(self) -> bool:
        return bool(self.running) or self._seconds_until_start() == 0

    def _seconds_until_start(self) -> float | None:
        """0 when the next batch may start now, None when nothing waits or a batch runs."""
        with self._lock:
            if not self.waiting:
                return None
            if self.continuous:
                return 0 if len(self.running) < self.max_batch_size else None
            if self.running:
                return None
            if len(self.waiting) >= self.max_batch_size:
                return 0
            oldest = self.waiting[0].created_at
        left = oldest + self.policy.max_queue_delay_ms / 1000 - time.monotonic()
        return max(0.0, left)

    def step(self) -> None:
        """Start a batch if one is due, run one Engine step, deliver what each sequence got."""
        outbox: Outbox = []
        if self._engine is None:
            # An Engine may only be used from the thread that made it: this one.
            self._engine = self.backend.new_engine()
            self._events = self._engine.create_event_buffer(4 * self.max_batch_size)
        self._reap_cancelled()
        self._maybe_regroup()
        if self._seconds_until_start() == 0:
            self._start(outbox)
        if self.running:
            try:
                events = self._engine.run(self._events)
            except Exception as exc:  # a kernel failure fails this batch, not the daemon
                log.exception("step failed for model %s", self.backend.info.name)
                self._fail_batch(str(exc), outbox)
            else:
                self.steps += 1
                self._postprocess(events, outbox)
        deliver(outbox)
        self._arm_timer()

    def _start(self, outbox: Outbox) -> None:
        started = 0
        while len(self.running) < self.max_batch_size:
            with self._lock:
                if not self.waiting:
                    break
                seq = self.waiting.popleft()
            # A sequence that rejoins after a regroup continues from what it generated.
            tokens = seq.prompt + seq.generated
            try:
                request, turn = self.backend.begin(
                    self._engine, tokens, seq.params, seq.max_new_tokens - len(seq.generated)
                )
            except Exception as exc:  # only this request fails
                log.exception("could not start a sequence on %s", self.backend.info.name)
                seq.status = Status.FINISHED
                end_sequence(seq, "error", outbox, error=str(exc))
                continue
            row = _Row(request, turn)
            self._rows[seq.id] = row
            self._by_request[id(request)] = seq
            seq.status = Status.RUNNING
            seq.n_prefilled = len(seq.prompt)
            self.running.append(seq)
            started += 1
        if started:
            self.batches += 1

    def _postprocess(self, events: Any, outbox: Outbox) -> None:
        import onnxruntime_genai as og

        token_flag = og.EngineEventFlags.TOKEN.value
        finished_flag = og.EngineEventFlags.TURN_FINISHED.value
        failed_flag = og.EngineEventFlags.FAILED.value
        now = time.monotonic()
        for event in events:
            seq = self._by_request.get(id(event.request))
            if seq is None or seq.status is not Status.RUNNING:
                continue  # a row we already ended (a stop string, a cancel)
            flags = event.flags.value
            if flags & token_flag:
                text, reason = accept_token(seq, int(event.token), self.backend, now)
                if reason is not None:
                    self._end(seq, reason, outbox, text, engine_done=bool(flags & finished_flag))
                    continue
                if text:
                    outbox.append((seq, Delta(text)))
            if flags & (finished_flag | failed_flag):
                self._engine_ended(seq, event, bool(flags & failed_flag), now, outbox)

    def _engine_ended(
        self, seq: Sequence, event: Any, failed: bool, now: float, outbox: Outbox
    ) -> None:
        """The Engine ended a turn our own rules did not: EOS, its length cap, or a failure."""
        import onnxruntime_genai as og

        reason = event.finish_reason
        if failed or reason == og.FinishReason.FAILED:
            self._end(seq, "error", outbox, error="onnxruntime-genai failed this request")
        elif reason == og.FinishReason.EOS:
            # The Engine does not report the end-of-generation token; count it as llama.cpp does.
            text, ended = accept_token(seq, min(self.backend.eos_ids), self.backend, now)
            self._end(seq, ended or "stop", outbox, text)
        else:
            self._end(seq, "length", outbox, drain(seq)[0])

    def _end(
        self,
        seq: Sequence,
        reason: str,
        outbox: Outbox,
        text: str = "",
        error: str | None = None,
        engine_done: bool = True,
    ) -> None:
        self._drop_row(seq, cancel=not engine_done)
        end_sequence(seq, reason, outbox, text, error)

    def _drop_row(self, seq: Sequence, cancel: bool) -> None:
        """Take a sequence out of the batch; its row runs on as padding until the batch ends."""
        row = self._rows.pop(seq.id, None)
        if row is not None:
            self._by_request.pop(id(row.request), None)
            try:
                if cancel:
                    row.request.cancel_turn(row.turn)
                row.request.close()
            except Exception:  # the Engine already let go of it
                log.debug("could not close a request on %s", self.backend.info.name, exc_info=True)
        seq.status = Status.FINISHED
        if seq in self.running:
            self.running.remove(seq)

    def _reap_cancelled(self) -> None:
        for seq in [s for s in self.running if s.cancelled]:
            self._drop_row(seq, cancel=True)
            seq.finish_reason = "cancelled"

    def _maybe_regroup(self) -> None:
        """End the batch early for a full queue, sending its few stragglers back to the head."""
        at = self.policy.regroup_at
        if self.continuous or at <= 0 or not self.running or len(self.running) > at:
            return
        if len(self.waiting) < self.max_batch_size - len(self.running):
            return
        stragglers = list(self.running)
        for seq in stragglers:
            self._drop_row(seq, cancel=True)
            seq.status = Status.WAITING
        with self._lock:
            self.waiting.extendleft(reversed(stragglers))
        self.regroups += 1

    def _fail_batch(self, error: str, outbox: Outbox) -> None:
        for seq in list(self.running):
            self._end(seq, "error", outbox, error=error)
        # Whatever state the failed Engine kept, the next batch starts from a fresh one.
        self._engine = None
