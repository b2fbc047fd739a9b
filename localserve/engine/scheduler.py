"""The continuous batcher of one model: which sequences run in the next step, and what came out.

Sequences join and leave between steps. Each step holds one decode token for every running
sequence, then prefill chunks of newly admitted ones under a per-step token budget (chunked
prefill), so a long prompt never stalls the streams already running. When the backend can embed,
embedding inputs borrow free slots too, and embedding steps take turns with generation steps.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from typing import Callable

from localserve.backends.base import Backend, EmbeddingBackend, StepChunk, StepPlan
from localserve.engine.embedding import EmbeddingJob
from localserve.engine.embedding_lane import EmbeddingLane
from localserve.engine.batcher import enqueue
from localserve.engine.errors import BadRequest
from localserve.engine.outputs import Outbox, accept_token, deliver, end_sequence
from localserve.engine.sequence import Delta, Sequence, Status

log = logging.getLogger(__name__)

# What one more micro-batch per step is worth in prefill tokens skipped (see _pick_slot).
RUN_COST_TOKENS = 256
# Copying another slot's cells costs a copy of its whole KV stream (a few ms here, about what
# prefilling one or two tokens costs): borrow a prefix only when it saves more than this.
MIN_BORROW_TOKENS = 8


class Scheduler:
    """Waiting and running sequences of one model, stepped by its device's engine loop."""

    def __init__(self, backend: Backend, max_waiting: int = 64, step_tokens: int = 512) -> None:
        self.backend = backend
        self.max_waiting = max_waiting
        self.step_tokens = max(step_tokens, backend.info.n_slots)
        self.waiting: deque[Sequence] = deque()
        self.running: list[Sequence] = []
        n_slots = backend.info.n_slots
        self.free_slots: list[int] = list(range(n_slots - 1, -1, -1))
        # What each slot's KV cells hold: a new prompt that shares a prefix with them (the next
        # turn of a chat, the same system prompt) skips prefilling that prefix.
        self.slot_tokens: list[list[int]] = [[] for _ in range(n_slots)]
        self._slot_used_at: list[int] = [0] * n_slots
        self.steps = 0
        self._lock = threading.Lock()
        self._wake: Callable[[], None] = lambda: None
        can_embed = isinstance(backend, EmbeddingBackend) and backend.pooling != "none"
        self.embeddings = EmbeddingLane(self, backend, max_waiting) if can_embed else None
        self._embedding_turn = False

    # -- called from the event loop ----------------------------------------------------------

    def attach(self, wake: Callable[[], None]) -> None:
        """Give the scheduler the callable that wakes its device's engine loop."""
        self._wake = wake

    def submit(self, seq: Sequence, prompt_field: str = "prompt") -> None:
        """Queue a sequence, or refuse it at once if it can never run or the queue is full."""
        enqueue(self.waiting, self._lock, seq, self.max_waiting, self.backend.info, prompt_field)
        self._wake()

    def submit_embedding(self, job: EmbeddingJob) -> None:
        """Queue an embeddings request's inputs; refuse at once what can never run."""
        if self.embeddings is None:
            raise BadRequest(
                f"model '{self.backend.info.name}' does not support embeddings", "model"
            )
        self.embeddings.submit(job)
        self._wake()

    def cancel(self, seq: Sequence) -> None:
        seq.cancel()
        self._wake()

    @property
    def busy(self) -> int:
        """Sequences running or waiting: what keeps the model from being idle."""
        lane = self.embeddings.busy if self.embeddings else 0
        return len(self.running) + len(self.waiting) + lane

    # -- called from the engine thread -------------------------------------------------------

    def has_work(self) -> bool:
        return bool(self.running or self.waiting) or bool(
            self.embeddings and self.embeddings.has_work()
        )

    def step(self) -> None:
        """One step: embedding and generation steps alternate while both have work."""
        lane = self.embeddings
        if lane is not None and lane.has_work():
            generating = bool(self.running or self.waiting)
            if self._embedding_turn or not generating:
                self._embedding_turn = False
                lane.step()
                return
            self._embedding_turn = True
        self._generation_step()

    def lend_slot(self) -> int:
        """A free slot for an embedding input, its cells wiped (embedding runs from position 0).

        The lowest free slot: embedding inputs then sit next to each other, in few micro-batches.
        """
        slot = min(self.free_slots)
        self.free_slots.remove(slot)
        self._forget_slot(slot)
        return slot

    def return_slot(self, slot: int, tokens: list[int] | None) -> None:
        """Take back a lent slot; `tokens` is what its cells hold, None if they are not to be
        trusted."""
        if tokens is None:
            self._forget_slot(slot)
        else:
            self.slot_tokens[slot] = tokens
        self._slot_used_at[slot] = self.steps
        self.free_slots.append(slot)

    def _generation_step(self) -> None:
        """Plan one forward pass, run it, and deliver what each sequence produced."""
        outbox: Outbox = []
        self._reap_cancelled()
        self._admit(outbox)
        plan, seqs = self._plan()
        if not plan.chunks:
            deliver(outbox)
            return
        try:
            sampled = self.backend.step(plan)
        except Exception as exc:  # a kernel failure fails this step's sequences, not the daemon
            log.exception("step failed for model %s", self.backend.info.name)
            for seq in seqs:
                # The failed batch may have written some of its cells: trust none of them.
                self._finish(seq, "error", outbox, error=str(exc), kv_valid=False)
            deliver(outbox)
            return
        self.steps += 1
        self._postprocess(plan, seqs, sampled, outbox)
        deliver(outbox)

    def _reap_cancelled(self) -> None:
        for seq in [s for s in self.running if s.cancelled]:
            self._release(seq)
            seq.finish_reason = "cancelled"
        if any(s.cancelled for s in self.waiting):
            with self._lock:
                self.waiting = deque(s for s in self.waiting if not s.cancelled)

    def _admit(self, outbox: Outbox) -> None:
        while self.free_slots and self.waiting:
            with self._lock:
                seq = self.waiting.popleft()
            slot, held = self._pick_slot(seq.prompt)
            try:
                cached = self._borrow_prefix(seq.prompt, slot, held)
                self._start_in_slot(seq, slot, cached)
            except Exception as exc:  # the slot goes back; only this request fails
                log.exception("could not start a sequence on %s", self.backend.info.name)
                self._forget_slot(slot)
                self.free_slots.append(slot)
                seq.finish_reason = "error"
                outbox.append((seq, Delta("", finish_reason="error", error=str(exc))))
                continue
            seq.status = Status.RUNNING
            self.running.append(seq)

    def _pick_slot(self, prompt: list[int]) -> tuple[int, dict[int, int]]:
        """The free slot that best trades a cached prefix against a compact running set.

        llama.cpp runs one micro-batch per run of consecutive busy slots, each a full pass over
        the weights, so a slot that starts a new run costs about as much per step as a couple of
        prefill tokens. When every slot is about to be busy anyway the runs merge by themselves,
        and only the cache counts. Ties go to the least recently used slot. Returns the slot, and
        how many leading prompt tokens each slot that was free holds (the chosen one included).
        """
        busy = {s.slot for s in self.running}
        filling_up = len(busy) + len(self.waiting) + 1 >= len(self.slot_tokens)
        cached = {s: _common_prefix(self.slot_tokens[s], prompt) for s in self.free_slots}

        def score(slot: int) -> tuple[int, int]:
            if filling_up:
                return cached[slot], -self._slot_used_at[slot]
            new_runs = 1 - ((slot - 1) in busy) - ((slot + 1) in busy)
            return cached[slot] - RUN_COST_TOKENS * new_runs, -self._slot_used_at[slot]

        best = max(self.free_slots, key=score)
        self.free_slots.remove(best)
        return best, cached

    def _borrow_prefix(self, prompt: list[int], slot: int, held_by_free: dict[int, int]) -> int:
        """Copy into `slot` the cells of another slot that holds a longer prefix of `prompt`.

        Concurrent requests often share their start (a system prompt, the chat template, a
        document asked about twice); a slot of their own rarely holds it, another slot often
        does, finished or still running (a running sequence's prefilled prompt cells no longer
        change). `held_by_free` is what `_pick_slot` found the free slots hold. Returns how many
        leading prompt tokens `slot` now holds.
        """
        cached = held_by_free[slot]
        copy = getattr(self.backend, "seq_copy", None)
        if copy is None:
            return cached
        source, best = None, cached
        for other, n in held_by_free.items():
            if n > best:
                source, best = other, n
        for running in self.running:
            n = _common_prefix(running.prompt[: running.n_prefilled], prompt)
            if n > best and running.slot is not None:
                source, best = running.slot, n
        if source is None or best - cached < MIN_BORROW_TOKENS:
            return cached
        copy(source, slot)
        return best

    def _start_in_slot(self, seq: Sequence, slot: int, cached: int) -> None:
        # At least the last prompt token is run again: its logits give the first new token.
        reuse = min(cached, len(seq.prompt) - 1)
        if not self.backend.seq_trim(slot, reuse):
            self.backend.seq_trim(slot, 0)
            reuse = 0
        self.slot_tokens[slot] = []
        self.backend.seq_start(slot, seq.params, seq.prompt)
        seq.slot = slot
        seq.n_prefilled = seq.cached_tokens = reuse

    def _plan(self) -> tuple[StepPlan, list[Sequence]]:
        """The next step's chunks, with the sequence each chunk belongs to."""
        plan = StepPlan()
        seqs: list[Sequence] = []
        budget = self.step_tokens
        for seq in self.running:
            if seq.prefill_done:
                assert seq.slot is not None
                plan.chunks.append(StepChunk(seq.slot, [seq.generated[-1]], seq.position, True))
                seqs.append(seq)
                budget -= 1
        for seq in self.running:
            if budget <= 0:
                break
            if not seq.prefill_done:
                assert seq.slot is not None
                start = seq.n_prefilled
                take = min(len(seq.prompt) - start, budget)
                last = start + take == len(seq.prompt)
                plan.chunks.append(StepChunk(seq.slot, seq.prompt[start : start + take], start, last))
                seqs.append(seq)
                budget -= take
        # llama.cpp splits a batch over per-slot KV streams into micro-batches of consecutive
        # sequence ids; out-of-order slots made it run one micro-batch per token (2x slower).
        order = sorted(range(len(seqs)), key=lambda i: plan.chunks[i].slot)
        plan.chunks = [plan.chunks[i] for i in order]
        return plan, [seqs[i] for i in order]

    def _postprocess(
        self, plan: StepPlan, seqs: list[Sequence], sampled: list[int], outbox: Outbox
    ) -> None:
        draws = iter(sampled)
        now = time.monotonic()
        for chunk, seq in zip(plan.chunks, seqs):
            if not seq.prefill_done:
                seq.n_prefilled += len(chunk.tokens)
            if chunk.sample:
                self._accept(seq, next(draws), now, outbox)

    def _accept(self, seq: Sequence, token: int, now: float, outbox: Outbox) -> None:
        """Take one sampled token: detokenize, check stops, and decide whether the sequence ends."""
        text, reason = accept_token(seq, token, self.backend, now)
        if reason is not None:
            self._finish(seq, reason, outbox, text=text)
        elif text:
            outbox.append((seq, Delta(text)))

    def _finish(
        self,
        seq: Sequence,
        reason: str,
        outbox: Outbox,
        text: str = "",
        error: str | None = None,
        kv_valid: bool = True,
    ) -> None:
        self._release(seq, kv_valid)
        end_sequence(seq, reason, outbox, text, error)

    def _release(self, seq: Sequence, kv_valid: bool = True) -> None:
        slot = seq.slot
        if slot is not None:
            self.backend.seq_end(slot)
            if kv_valid:
                # The last sampled token was never run, so its cell is not in the cache.
                decoded = seq.generated[:-1] if seq.prefill_done else []
                self.slot_tokens[slot] = seq.prompt[: seq.n_prefilled] + decoded
            else:
                self._forget_slot(slot)
            self._slot_used_at[slot] = self.steps
            self.free_slots.append(slot)
            seq.slot = None
        seq.status = Status.FINISHED
        self.running.remove(seq)

    def _forget_slot(self, slot: int) -> None:
        """Wipe a slot whose cells can no longer be trusted."""
        self.backend.seq_trim(slot, 0)
        self.slot_tokens[slot] = []


def _common_prefix(a: list[int], b: list[int]) -> int:
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i
