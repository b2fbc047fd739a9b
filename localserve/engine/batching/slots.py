"""What each slot's KV cells hold, and which slot, holding which prefix, a new prompt starts in.

A slot keeps the cells of its last sequence after it ends, so a new prompt that shares a prefix
with them (the next turn of a chat, the same system prompt) skips prefilling that prefix. A new
sequence starts from the longest prefix of its prompt at hand anywhere: its slot's own cells,
another slot's (copied), or the prompt cache's (restored, from memory or, after the model was
unloaded and loaded again, from disk). Whatever the slot held that is about
to be lost goes to the prompt cache first.
"""

from __future__ import annotations

import time
from typing import Protocol, runtime_checkable

from localserve.backends.base import SlotBackend
from localserve.engine.batching.prefix import common_prefix
from localserve.engine.batching.prompt_cache import PromptCache, SavedPrompt
from localserve.engine.batching.sequence import Sequence

# What one more micro-batch per step is worth in prefill tokens skipped (see _pick).
RUN_COST_TOKENS = 256
# Copying another slot's cells costs a copy of its whole KV stream (a few ms here, about what
# prefilling one or two tokens costs), restoring saved cells about a millisecond: either is
# worth it only when it saves more prefill than this over the slot's own cells.
MIN_GAIN_TOKENS = 8
# Contents this short are cheaper to prefill again than to save and restore.
MIN_SAVE_TOKENS = 16


@runtime_checkable
class SlotStates(Protocol):
    """A backend that can copy a slot's cells to another slot, and save and restore them."""

    def seq_copy(self, source: int, slot: int) -> None: ...

    def seq_save(self, slot: int) -> bytearray: ...

    def seq_restore(self, slot: int, state: bytearray) -> bool: ...


class Slots:
    """The slots of one model: which are free, what their cells hold, when each was last used.

    Generation and embedding steps both borrow these slots; both tick `steps`, the clock that
    `used_at` is read on.
    """

    def __init__(self, backend: SlotBackend, prompt_cache: PromptCache | None = None) -> None:
        n_slots = backend.info.n_slots
        self.backend = backend
        self.states = backend if isinstance(backend, SlotStates) else None
        self.cache = prompt_cache if self.states is not None else None
        self.free: list[int] = list(range(n_slots - 1, -1, -1))
        # What each free slot's cells hold; a busy slot's entry is empty until it is freed.
        self.tokens: list[list[int]] = [[] for _ in range(n_slots)]
        self.used_at: list[int] = [0] * n_slots
        self.steps = 0
        # Slots whose cells a copy reads at the next decode: llama.cpp moves a cross-stream
        # copy's metadata at once but its data only then, so nothing may write them before.
        self._copy_sources: set[int] = set()

    def take(self, prompt: list[int], running: list[Sequence], n_waiting: int) -> tuple[int, int]:
        """A free slot for `prompt`, its cells holding the longest prefix of it at hand.

        Returns the slot and how many leading prompt tokens it holds. At least the last prompt
        token is left to run: its logits give the first new token.
        """
        slot, held = self._pick(prompt, running, n_waiting)
        try:
            held_now = self._fill(slot, prompt, held, running)
            reuse = min(held_now, len(prompt) - 1)
            if not self.backend.seq_trim(slot, reuse):
                self.backend.seq_trim(slot, 0)
                reuse = 0
        except BaseException:
            self.forget(slot)
            self.free.append(slot)
            raise
        self.tokens[slot] = []
        return slot, reuse

    def at_hand(self, prompt: list[int], running: list[Sequence]) -> int:
        """How many leading tokens of `prompt` a start would not prefill: the longest prefix a
        free slot, a running sequence's prefilled prompt or the prompt cache holds."""
        held = [common_prefix(self.tokens[slot], prompt) for slot in self.free]
        held += (common_prefix(s.context[: s.n_prefilled], prompt) for s in running)
        if self.cache is not None:
            held.append(self.cache.longest_prefix(prompt)[1])
        return max(held, default=0)

    def lend(self) -> int:
        """A free slot with its cells wiped (an embedding input runs from position 0).

        The lowest free slot: embedding inputs then sit next to each other, in few micro-batches.
        """
        slot = min(self.free)
        self.free.remove(slot)
        self._save(slot, keep=0)
        self.forget(slot)
        return slot

    def put_back(self, slot: int, tokens: list[int] | None) -> None:
        """Free a slot; `tokens` is what its cells hold, None if they are not to be trusted."""
        if tokens is None:
            self.forget(slot)
        else:
            self.tokens[slot] = tokens
        self.used_at[slot] = self.steps
        self.free.append(slot)

    def tick(self) -> None:
        """A step ran on these slots (and with its decode, every copy put off until then)."""
        self.steps += 1
        self._copy_sources.clear()

    def forget(self, slot: int) -> None:
        """Wipe a slot whose cells can no longer be trusted."""
        self.backend.seq_trim(slot, 0)
        self.tokens[slot] = []

    def _pick(
        self, prompt: list[int], running: list[Sequence], n_waiting: int
    ) -> tuple[int, dict[int, int]]:
        """The free slot that best trades a cached prefix against a compact running set.

        llama.cpp runs one micro-batch per run of consecutive busy slots, each a full pass over
        the weights, so a slot that starts a new run costs about as much per step as a couple of
        prefill tokens. When every slot is about to be busy anyway the runs merge by themselves,
        and only the cache counts. Ties go to the least recently used slot. Returns the slot, and
        how many leading prompt tokens each slot that was free holds (the chosen one included).
        """
        busy = {s.slot for s in running}
        filling_up = len(busy) + n_waiting + 1 >= len(self.tokens)
        cached = {s: common_prefix(self.tokens[s], prompt) for s in self.free}

        def score(slot: int) -> tuple[int, int]:
            if filling_up:
                return cached[slot], -self.used_at[slot]
            new_runs = 1 - ((slot - 1) in busy) - ((slot + 1) in busy)
            return cached[slot] - RUN_COST_TOKENS * new_runs, -self.used_at[slot]

        best = max(self.free, key=score)
        self.free.remove(best)
        return best, cached

    def _fill(
        self, slot: int, prompt: list[int], held: dict[int, int], running: list[Sequence]
    ) -> int:
        """Make `slot` hold the longest prefix of `prompt` at hand; returns its length.

        Concurrent requests often share their start (a system prompt, the chat template, a
        document asked about twice): a slot of their own rarely holds it, another slot often
        does, free or running (a running sequence's prefilled prompt cells no longer change).
        `held` is what `_pick` found the free slots hold.
        """
        own = held[slot]
        if self.states is None:
            return own
        source, copied = None, own
        for other, n in held.items():
            if n > copied:
                source, copied = other, n
        for seq in running:
            n = common_prefix(seq.context[: seq.n_prefilled], prompt)
            if n > copied and seq.slot is not None:
                source, copied = seq.slot, n
        entry, saved = self.cache.longest_prefix(prompt) if self.cache is not None else (None, 0)
        # A restore writes the slot's data at once: it would reach a pending copy's target.
        restorable = slot not in self._copy_sources
        if entry is not None and restorable and saved - max(own, copied) >= MIN_GAIN_TOKENS:
            assert self.cache is not None
            t0 = time.perf_counter()
            state = self.cache.state_of(entry)
            if state is not None:
                self._save(slot, keep=0)
                if not self.states.seq_restore(slot, state):
                    self.cache.refused(entry)
                    self.forget(slot)
                    return 0
                self.cache.used(entry, saved, time.perf_counter() - t0)
                return saved
        if source is not None and copied - own >= MIN_GAIN_TOKENS:
            self._save(slot, keep=0)
            self.states.seq_copy(source, slot)
            self._copy_sources.add(source)
            return copied
        self._save(slot, keep=min(own, len(prompt) - 1))
        return own

    def spill(self) -> int:
        """Before the model is unloaded: write what the free slots hold and the prompt cache's
        entries to disk, to be restored when it loads again. Returns how many were written."""
        if self.cache is None or self.states is None:
            return 0
        held = [
            SavedPrompt(self.tokens[slot], self.states.seq_save(slot))
            for slot in self.free
            if len(self.tokens[slot]) >= MIN_SAVE_TOKENS
        ]
        return self.cache.spill(held)

    def _save(self, slot: int, keep: int) -> None:
        """Save a free slot's cells to the prompt cache when more than `keep` tokens of them
        are about to be lost, unless the cache holds them already.

        A free slot's cells are final: the decode that followed its last change also ran any
        copy of cells llama.cpp had put off until then.
        """
        tokens = self.tokens[slot]
        if self.cache is None or self.states is None or len(tokens) - keep < MIN_SAVE_TOKENS:
            return
        if not self.cache.holds(tokens):
            self.cache.add(tokens, self.states.seq_save(slot))
