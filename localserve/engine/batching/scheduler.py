"""The continuous batcher of one model: which sequences run in the next step, and what came out.

Sequences join and leave between steps. Each step holds one decode token for every running
sequence, then prefill chunks of newly admitted ones, shortest first, under a per-step token
budget (chunked prefill), so a long prompt never stalls the streams already running. When the
backend can embed, embedding inputs borrow free slots too (engine/batching/embedding_lane.py),
and this scheduler decides whose turn it is: embedding and generation steps take turns.
A plain sequence (greedy, or sampled without a seed) may add drafted tokens to its decode token,
verified in the same step (engine/batching/speculation.py).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from localserve.backends.base import EmbeddingBackend, SlotBackend
from localserve.engine.batching import priorities
from localserve.engine.batching.admission import AdmissionQueue, Cancellable
from localserve.engine.batching.draft_model import DraftModel
from localserve.engine.batching.embedding import EmbeddingJob
from localserve.engine.batching.embedding_lane import EmbeddingLane
from localserve.engine.batching.outputs import Outbox, StepResult, accept_token, end_sequence
from localserve.engine.batching.prompt_cache import PromptCache
from localserve.engine.batching.sequence import Delta, Sequence, Status
from localserve.engine.batching.slots import Slots
from localserve.engine.batching.speculation import Speculation
from localserve.ground.errors import BadRequest
from localserve.ground.step import StepChunk, StepPlan

log = logging.getLogger(__name__)

# A step's fixed cost, one pass over the weights, in tokens' worth of compute (see _defer).
STEP_COST_TOKENS = 2
# The most steps a prompt's prefill may be put off for shorter ones.
MAX_DEFERRALS = 16
# Prefill tokens a step may carry while other sequences decode: each step's time is the gap
# between their tokens, and 512 prompt tokens took 3 to 5 s here. 128 keeps the gap under a
# second for a few percent more steps in a long prefill (docs/notes/2026-11-prefill-chunk-cap.md).
PREFILL_TOKENS_WHILE_DECODING = 128


class Scheduler:
    """Waiting and running sequences of one model, stepped by its device's engine loop."""

    def __init__(
        self,
        backend: SlotBackend,
        max_waiting: int = 64,
        step_tokens: int = 512,
        prompt_cache: PromptCache | None = None,
        draft_tokens: int = 0,
        background_share: float = 0.25,
        draft_model: DraftModel | None = None,
    ) -> None:
        info = backend.info
        self.backend = backend
        self.step_tokens = max(step_tokens, info.n_slots)
        # A prompt must leave a slot room for its first new token.
        self.waiting: AdmissionQueue[Sequence] = AdmissionQueue(
            info.name, max_waiting, info.n_ctx_slot, reserve=1, background=priorities.is_background
        )
        self.guaranteed = priorities.guaranteed_slots(background_share, info.n_slots)
        self.preemptions = 0
        self.running: list[Sequence] = []
        self.slots = Slots(backend, prompt_cache)
        self._wake: Callable[[], None] = lambda: None
        self.embeddings: EmbeddingLane | None = None
        if isinstance(backend, EmbeddingBackend) and backend.pooling != "none":
            self.embeddings = EmbeddingLane(backend, self.slots, self.step_tokens, max_waiting)
        self._embedding_turn = False
        size_ratio = (
            draft_model.backend.info.size_bytes / max(info.size_bytes, 1) if draft_model else 1
        )
        self.drafting = Speculation(draft_tokens, info.n_ctx_slot, draft_model, size_ratio)

    # -- called off the engine thread: a load's, the worker's main one -----------------------

    def attach(self, wake: Callable[[], None]) -> None:
        """Give the scheduler the callable that wakes its device's engine loop."""
        self._wake = wake

    def submit(self, seq: Sequence, prompt_field: str = "prompt") -> None:
        """Queue a sequence, or refuse it at once if it can never run or the queue is full."""
        self.waiting.submit([seq], prompt_field)
        self._wake()

    def submit_embedding(self, job: EmbeddingJob) -> None:
        """Queue an embeddings request's inputs; refuse at once what can never run."""
        if self.embeddings is None:
            raise BadRequest(
                f"model '{self.backend.info.name}' does not support embeddings", "model"
            )
        self.embeddings.submit(job)
        self._wake()

    def cancel(self, request: Cancellable) -> None:
        """Cancel a sequence or an embedding job: what of it waits leaves the queue now, what
        runs frees its slots at the next step."""
        request.cancelled = True
        self._reap_waiting()
        self._wake()

    @property
    def prompt_cache(self) -> PromptCache | None:
        return self.slots.cache

    @property
    def busy(self) -> int:
        """Sequences running or waiting: what keeps the model from being idle."""
        lane = self.embeddings.busy if self.embeddings else 0
        return len(self.running) + len(self.waiting) + lane

    def save_conversations(self) -> int:
        """Keep the slots' and the prompt cache's conversations on disk for the model's next
        load; called once the device loop no longer steps it."""
        return self.slots.spill()

    # -- called from the engine thread -------------------------------------------------------

    def has_work(self) -> bool:
        return bool(self.running or self.waiting) or bool(
            self.embeddings and self.embeddings.has_work()
        )

    def step(self) -> StepResult:
        """One step: embedding and generation steps alternate while both have work."""
        lane = self.embeddings
        if lane is not None and lane.has_work():
            generating = bool(self.running or self.waiting)
            if lane.background_only and priorities.interactive(self.running, self.waiting):
                return StepResult(self._generation_step())
            if self._embedding_turn or not generating:
                self._embedding_turn = False
                return lane.step()
            self._embedding_turn = True
        return StepResult(self._generation_step())

    def _generation_step(self) -> Outbox:
        """Plan one forward pass, run it, and return what each sequence produced."""
        outbox: Outbox = []
        self._reap_cancelled()
        self._make_room()
        self._admit(outbox)
        plan, seqs = self._plan()
        if not plan.chunks:
            return outbox
        try:
            t0 = time.perf_counter()
            sampled = self.backend.step(plan)
            self.drafting.step_cost.record(plan, time.perf_counter() - t0)
        except Exception as exc:  # a kernel failure fails this step's sequences, not the daemon
            log.exception("step failed for model %s", self.backend.info.name)
            for seq in seqs:
                # The failed batch may have written some of its cells: trust none of them.
                self._finish(seq, "error", outbox, error=str(exc), kv_valid=False)
            return outbox
        self.slots.tick()
        self._postprocess(plan, seqs, sampled, outbox)
        return outbox

    def _reap_cancelled(self) -> None:
        for seq in [s for s in self.running if s.cancelled]:
            self._release(seq)
            seq.mark_cancelled()
        self._reap_waiting()

    def _reap_waiting(self) -> None:
        """Take cancelled requests out of the queues; from either thread."""
        for seq in self.waiting.reap():
            seq.mark_cancelled()
        if self.embeddings is not None:
            self.embeddings.waiting.reap()

    def _make_room(self) -> None:
        """Preempt background sequences for the interactive ones waiting (see priorities)."""
        waiting = self.waiting.count(background=False)
        if not waiting:
            return
        for seq in priorities.victims(self.running, waiting, len(self.slots.free), self.guaranteed):
            assert seq.slot is not None
            self.backend.seq_end(seq.slot)
            self.slots.put_back(seq.slot, seq.held)
            self.running.remove(seq)
            seq.preempt()
            self.waiting.put_back([seq])
            self.preemptions += 1

    def _admit(self, outbox: Outbox) -> None:
        while self.slots.free and (seq := priorities.next_waiting(self)) is not None:
            try:
                slot, reuse = self.slots.take(seq.context, self.running, len(self.waiting))
            except Exception as exc:  # the slot went back; only this request fails
                self._fail_start(seq, exc, outbox)
                continue
            try:
                self.backend.seq_start(slot, seq.params, seq.context)
            except Exception as exc:
                self.slots.put_back(slot, None)
                self._fail_start(seq, exc, outbox)
                continue
            seq.slot = slot
            seq.n_prefilled = reuse
            if not seq.resumed_at:  # a resumed sequence's usage counts its first start
                seq.cached_tokens = reuse
                seq.queued_s = time.monotonic() - seq.created_at
            seq.status = Status.RUNNING
            self.running.append(seq)

    def _fail_start(self, seq: Sequence, exc: Exception, outbox: Outbox) -> None:
        log.error("could not start a sequence on %s: %s", self.backend.info.name, exc, exc_info=exc)
        seq.finish_reason = "error"
        outbox.append((seq, Delta("", finish_reason="error", error=str(exc))))

    def _plan(self) -> tuple[StepPlan, list[Sequence]]:
        """The next step's chunks, with the sequence each chunk belongs to.

        Every running sequence decodes one token. Prompts then prefill shortest remainder first
        (see _defer): a burst of requests whose prompts are mostly cached gets its first tokens
        a step after arriving, instead of after the longest prompt among them.
        """
        plan = StepPlan()
        seqs: list[Sequence] = []
        budget = self.step_tokens
        decoding = 0
        decoders = priorities.decoders(self.running)
        drafts_of = self.drafting.drafts(decoders, budget)
        for seq in decoders:
            assert seq.slot is not None
            drafts = drafts_of.get(seq.id, [])
            tokens = [seq.generated[-1], *drafts]
            plan.chunks.append(StepChunk(seq.slot, tokens, seq.position, True, len(drafts)))
            seqs.append(seq)
            decoding += len(tokens)
        budget -= decoding
        if decoding:
            budget = min(budget, PREFILL_TOKENS_WHILE_DECODING)
        prefilling = sorted(
            (s for s in self.running if not s.prefill_done),
            key=lambda s: (s.params.background, s.prefill_deferrals < MAX_DEFERRALS, s.to_prefill),
        )
        first_tokens = interactive = 0
        for seq in prefilling:
            # Background prompts wait while an interactive one prefills: its first token sooner.
            if budget <= 0 or (seq.params.background and interactive):
                break
            assert seq.slot is not None
            start = seq.n_prefilled
            take = min(len(seq.context) - start, priorities.prefill_cap(seq, budget, decoding))
            if _defer(seq, take, first_tokens, decoding):
                seq.prefill_deferrals += 1
                continue
            last = start + take == len(seq.context)
            plan.chunks.append(StepChunk(seq.slot, seq.context[start : start + take], start, last))
            seqs.append(seq)
            budget -= take
            first_tokens += last
            interactive += not seq.params.background
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
            if chunk.drafts:
                picks = [next(draws) for _ in range(chunk.drafts + 1)]
                self._verify(seq, chunk, picks, now, outbox)
            elif chunk.sample:
                self._accept(seq, next(draws), now, outbox)

    def _verify(
        self, seq: Sequence, chunk: StepChunk, picks: list[int], now: float, outbox: Outbox
    ) -> None:
        """Keep the drafts up to the first the model would not have written, and the model's
        own token after them: the tokens plain decoding gives, a step's worth or more. A
        greedy sequence's picks are its argmax at each row; a sampled one's were judged by the
        backend (backends/draft_rule.py), the draft itself where it was kept."""
        drafts = chunk.tokens[1:]
        kept = 0
        while kept < len(drafts) and picks[kept] == drafts[kept]:
            kept += 1
        assert seq.slot is not None
        self.drafting.judge(seq, len(drafts), kept)
        # The rejected drafts' cells go: the next token runs at the first of their positions.
        if not self.backend.seq_trim(seq.slot, chunk.start_pos + 1 + kept):
            error = "could not roll back the cells of rejected draft tokens"
            self._finish(seq, "error", outbox, error=error, kv_valid=False)
            return
        texts: list[str] = []
        for token in picks[: kept + 1]:
            text, reason = accept_token(seq, token, self.backend, now)
            if reason is not None:
                self._finish(seq, reason, outbox, text="".join(texts) + text)
                return
            texts.append(text)
        if joined := "".join(texts):
            outbox.append((seq, Delta(joined)))

    def speculation(self) -> dict[str, int]:
        """Draft tokens verified and accepted so far, for /metrics."""
        return self.drafting.counts()

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
            self.slots.put_back(slot, seq.held if kv_valid else None)
            seq.slot = None
        seq.status = Status.FINISHED
        self.running.remove(seq)


def _defer(seq: Sequence, take: int, first_tokens: int, decoding: int) -> bool:
    """Whether `take` prompt tokens of `seq` wait for the next step, to spare the sequences
    already due to sample their first token in this one.

    A step's time grows with its tokens, so those first tokens would each come `take` tokens'
    compute later; waiting costs `seq` one step of its own: a weight pass plus the decode tokens
    the next step holds. A sequence waits at most MAX_DEFERRALS steps, so a steady stream of
    short prompts cannot starve a long one.
    """
    if first_tokens == 0 or seq.prefill_deferrals >= MAX_DEFERRALS:
        return False
    return first_tokens * take > STEP_COST_TOKENS + decoding + first_tokens
