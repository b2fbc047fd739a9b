"""Copies between slots, specified against a fake that defers copies as llama.cpp does: a
cross-stream `seq_cp` moves the cells' bookkeeping at once and their data at the next decode."""

from __future__ import annotations

from localserve.engine.batching.prompt_cache import PromptCache
from localserve.engine.batching.slots import Slots
from tests.support.fakes import FakeBackend

SHARED = list(range(100, 140))  # a 40-token system prompt, say
SAVED = list(range(500, 540))  # a conversation in the prompt cache


class DeferredCopies(FakeBackend):
    """Slot data as labels; copies land at the next step, restores at once."""

    def __init__(self, n_slots: int) -> None:
        super().__init__(n_slots=n_slots, n_ctx=256)
        self.data: dict[int, str] = {}
        self.pending: list[tuple[int, int]] = []

    def seq_copy(self, source: int, slot: int) -> None:
        self.pending.append((source, slot))

    def seq_save(self, slot: int) -> bytearray:
        return bytearray(self.data.get(slot, "").encode())

    def seq_restore(self, slot: int, state: bytearray) -> bool:
        self.data[slot] = state.decode()
        return True

    def decode(self) -> None:
        for source, slot in self.pending:
            self.data[slot] = self.data.get(source, "")
        self.pending.clear()


def test_a_slot_whose_cells_a_pending_copy_reads_is_not_restored_into_before_the_decode() -> None:
    backend = DeferredCopies(n_slots=4)
    cache = PromptCache(1 << 20)
    cache.add(SAVED, bytearray(b"the saved conversation"))
    slots = Slots(backend, cache)
    # Slot 0 is free and holds the shared prompt; slot 3 was used more recently than slot 0.
    slots.free = [0, 3, 1]
    slots.tokens[0] = SHARED
    backend.data[0] = "the shared prompt"
    slots.used_at[3] = 5
    running = [_Running(slot=2)]
    first, _ = slots.take(SHARED + [1], running, n_waiting=1)
    assert first != 0 and backend.pending == [(0, first)], "it borrows slot 0's cells"
    second, _ = slots.take(SAVED + [1], running + [_Running(slot=first)], n_waiting=0)
    backend.decode()
    assert backend.data[first] == "the shared prompt", "the copy still reads what slot 0 held"


class _Running:
    """A running sequence as Slots sees one: its slot, and no prompt it could lend."""

    def __init__(self, slot: int) -> None:
        self.slot = slot
        self.context: list[int] = []
        self.n_prefilled = 0
