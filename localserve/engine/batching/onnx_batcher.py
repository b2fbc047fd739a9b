"""The batcher of one onnxruntime-genai model: which requests run in the next step.

The runtime (backends/onnx_genai.py) batches one of two ways, and says which in `continuous`:

- **continuous**: a request joins the running batch at the next step, as soon as a row is
  free (our own KV rows on the CPU, or onnxruntime-genai's paged Engine on CUDA and WebGPU);
  a request that arrives while a batch runs gets its first token one prefill later;
- **static** (onnxruntime-genai's Engine for any other model): a batch runs until its last
  request ends, and requests that arrive meanwhile wait in our queue for the next one.

Static batches start with a per-model policy (the BentoML / Triton knobs):

- `max_batch_size` rows per batch (the only one continuous batching uses);
- `max_queue_delay_ms`: when the model is idle and a request arrives, wait this long for others
  to join it (a full batch starts at once);
- `max_waiting`: the queue's length; past it a request is refused at once (QueueFull).

Each step is one runtime step for the whole batch; every sequence's new token goes through the
same post-processing as the GGUF scheduler's (engine/batching/outputs.py), so a finished
sequence streams its end at once and never waits for the batch's slowest.

`regroup_at` (off by default, static batches only) ends a batch early when only that many rows
still run and a full batch's worth of requests waits: the stragglers rejoin the queue's head and
continue from their prompt plus what they generated, which costs one prefill of that text.

The runtime is a `BatchRuntime` (backends/base.py): this batcher names each request by its
sequence's id and reads back our own `TurnEvent`s, never the runtime's types.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from localserve.backends.base import BatchRuntime, TurnEnd, TurnEvent
from localserve.engine.batching.admission import AdmissionQueue, Cancellable
from localserve.engine.batching.outputs import (
    Outbox,
    StepResult,
    accept_token,
    drain,
    end_sequence,
)
from localserve.engine.batching.priorities import is_background
from localserve.engine.batching.sequence import Delta, Sequence, Status

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class BatchPolicy:
    max_batch_size: int
    max_queue_delay_ms: float
    max_waiting: int
    # End a batch early for a full queue once this few rows still run (0: never; see regroup).
    regroup_at: int = 0


class OnnxBatcher:
    """Waiting and running sequences of one ONNX model, stepped by its device's engine loop."""

    def __init__(self, backend: BatchRuntime, policy: BatchPolicy) -> None:
        self.backend = backend
        self.policy = policy
        self.max_batch_size = max(1, min(policy.max_batch_size, backend.max_batch_size))
        self.continuous = backend.continuous
        info = backend.info
        self.waiting: AdmissionQueue[Sequence] = AdmissionQueue(
            info.name, policy.max_waiting, info.n_ctx_slot, reserve=1, background=is_background
        )
        self.running: list[Sequence] = []
        self._engine_ready = False
        self._wake: Callable[[], None] = lambda: None
        self._timer: threading.Timer | None = None
        # What the benchmark and /api/ps may want to know.
        self.steps = 0
        self.batches = 0
        self.regroups = 0

    # -- called off the engine thread: a load's, the worker's main one -----------------------

    def attach(self, wake: Callable[[], None]) -> None:
        self._wake = wake

    def submit(self, seq: Sequence, prompt_field: str = "prompt") -> None:
        self.waiting.submit([seq], prompt_field)
        self._wake()
        self._arm_timer()

    def cancel(self, request: Cancellable) -> None:
        request.cancelled = True
        for seq in self.waiting.reap():
            seq.mark_cancelled()
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
        oldest = self.waiting.head()
        if oldest is None:
            return None
        if self.continuous:
            return 0 if len(self.running) < self.max_batch_size else None
        if self.running:
            return None
        if len(self.waiting) >= self.max_batch_size:
            return 0
        left = oldest.created_at + self.policy.max_queue_delay_ms / 1000 - time.monotonic()
        return max(0.0, left)

    def step(self) -> StepResult:
        """Start a batch if one is due, run one Engine step; return what each sequence got."""
        outbox: Outbox = []
        if not self._engine_ready:
            # An Engine may only be used from the thread that made it: this one.
            self.backend.new_engine()
            self._engine_ready = True
        self._reap_cancelled()
        self._maybe_regroup()
        if self._seconds_until_start() == 0:
            self._start(outbox)
        if self.running:
            try:
                events = self.backend.run()
            except Exception as exc:  # a kernel failure fails this batch, not the daemon
                log.exception("step failed for model %s", self.backend.info.name)
                self._fail_batch(str(exc), outbox)
            else:
                self.steps += 1
                self._postprocess(events, outbox)
        self._arm_timer()
        return StepResult(outbox)

    def _next(self) -> Sequence | None:
        """Interactive requests first; nothing is preempted here (see priorities)."""
        return self.waiting.take(background=False) or self.waiting.take()

    def _start(self, outbox: Outbox) -> None:
        started = 0
        while len(self.running) < self.max_batch_size and (seq := self._next()) is not None:
            # A sequence that rejoins after a regroup continues from what it generated.
            tokens = seq.prompt + seq.generated
            try:
                self.backend.begin(
                    seq.id, tokens, seq.params, seq.max_new_tokens - len(seq.generated)
                )
            except Exception as exc:  # only this request fails
                log.exception("could not start a sequence on %s", self.backend.info.name)
                seq.status = Status.FINISHED
                end_sequence(seq, "error", outbox, error=str(exc))
                continue
            seq.status = Status.RUNNING
            seq.queued_s = time.monotonic() - seq.created_at
            seq.n_prefilled = len(seq.prompt)
            self.running.append(seq)
            started += 1
        if started:
            self.batches += 1

    def _postprocess(self, events: list[TurnEvent], outbox: Outbox) -> None:
        now = time.monotonic()
        by_key = {seq.id: seq for seq in self.running}
        for event in events:
            seq = by_key.get(event.key)
            if seq is None or seq.status is not Status.RUNNING:
                continue  # a row we already ended (a stop string, a cancel)
            if event.token is not None:
                text, reason = accept_token(seq, event.token, self.backend, now)
                if reason is not None:
                    self._end(seq, reason, outbox, text, engine_done=event.end is not None)
                    continue
                if text:
                    outbox.append((seq, Delta(text)))
            if event.end is not None:
                self._engine_ended(seq, event.end, now, outbox)

    def _engine_ended(self, seq: Sequence, end: TurnEnd, now: float, outbox: Outbox) -> None:
        """The Engine ended a turn our own rules did not: EOS, its length cap, or a failure."""
        if end is TurnEnd.FAILED:
            self._end(seq, "error", outbox, error="onnxruntime-genai failed this request")
        elif end is TurnEnd.EOS:
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
        """Take a sequence out of the batch; in a static batch its row runs on as padding until
        the batch ends, in a continuous one the row is free for the next request."""
        if seq in self.running:
            self.backend.release(seq.id, cancel)
            self.running.remove(seq)
        seq.status = Status.FINISHED

    def _reap_cancelled(self) -> None:
        for seq in [s for s in self.running if s.cancelled]:
            self._drop_row(seq, cancel=True)
            seq.mark_cancelled()
        for seq in self.waiting.reap():
            seq.mark_cancelled()

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
        self.waiting.put_back(stragglers)
        self.regroups += 1

    def _fail_batch(self, error: str, outbox: Outbox) -> None:
        for seq in list(self.running):
            self._end(seq, "error", outbox, error=error)
        # Whatever state the failed Engine kept, the next batch starts from a fresh one.
        self._engine_ready = False
