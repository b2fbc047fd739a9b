"""Slot contents kept in host memory after their slot went to another prompt.

A slot holds the KV cells of its last conversation until a new request needs the slot. With
more conversations than slots (many users, an editor plugin re-sending the same file, a chat
resumed after a burst of other traffic) a conversation's cells are overwritten before it comes
back. The prompt cache keeps them, as llama.cpp's server does with `--cache-ram`: the next
request that starts with them restores its prefix in about a millisecond instead of prefilling
it, at several milliseconds a token here.

Entries are the backend's own serialization of one slot's cells, opaque to this module. The
cache never grows past its limit, which the model's memory reservation already counts (see
formats/gguf.py); the least recently used entries go first. When the model is unloaded its
entries go to disk (engine/batching/saved_conversations.py), and are looked up there too once it
loads again.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from itertools import count

from localserve.engine.batching.prefix import common_prefix, extends
from localserve.engine.batching.saved_conversations import SavedConversations, SpilledPrompt


@dataclass(frozen=True)
class SavedPrompt:
    """The tokens a slot's cells held, and those cells as the backend serialized them."""

    tokens: list[int]
    state: bytearray

    @property
    def size(self) -> int:
        return len(self.state)


class PromptCache:
    """Saved slot contents of one model, within a byte limit, least recently used out first."""

    def __init__(self, limit_bytes: int, disk: SavedConversations | None = None) -> None:
        self.limit_bytes = limit_bytes
        self.disk = disk
        self._entries: OrderedDict[int, SavedPrompt] = OrderedDict()
        self._ids = count()
        self.size = 0
        # What the cache saved prefill from, for the admin stats.
        self.hits = 0
        self.tokens_restored = 0
        self.disk_hits = 0
        self.restore_ms = 0.0

    def __len__(self) -> int:
        return len(self._entries)

    def longest_prefix(self, prompt: list[int]) -> tuple[SavedPrompt | SpilledPrompt | None, int]:
        """The entry sharing the longest prefix with `prompt`, in memory or on disk (memory wins
        a tie), and how many tokens it shares."""
        best: SavedPrompt | SpilledPrompt | None = None
        best_n = 0
        for entry in self._entries.values():
            n = common_prefix(entry.tokens, prompt)
            if n > best_n:
                best, best_n = entry, n
        if self.disk is not None:
            spilled, n = self.disk.longest_prefix(prompt)
            if n > best_n:
                best, best_n = spilled, n
        return best, best_n

    def state_of(self, entry: SavedPrompt | SpilledPrompt) -> bytearray | None:
        """An entry's cells, read from disk for a spilled one (None if that failed)."""
        if isinstance(entry, SavedPrompt):
            return entry.state
        return self.disk.read(entry) if self.disk is not None else None

    def refused(self, entry: SavedPrompt | SpilledPrompt) -> None:
        """The backend would not restore `entry`: it is dropped."""
        if isinstance(entry, SpilledPrompt):
            if self.disk is not None:
                self.disk.drop(entry)
            return
        for key, e in list(self._entries.items()):
            if e is entry:
                self._drop(key)

    def holds(self, tokens: list[int]) -> bool:
        """Whether some entry already starts with all of `tokens`: saving them adds nothing."""
        return any(extends(e.tokens, tokens) for e in self._entries.values())

    def add(self, tokens: list[int], state: bytearray) -> bool:
        """Keep a slot's contents; entries they extend are dropped. False if they cannot fit."""
        if len(state) > self.limit_bytes:
            return False
        for key, entry in list(self._entries.items()):
            if extends(tokens, entry.tokens):
                self._drop(key)
        while self.size + len(state) > self.limit_bytes:
            self._drop(next(iter(self._entries)))
        self._entries[next(self._ids)] = SavedPrompt(tokens, state)
        self.size += len(state)
        return True

    def used(self, entry: SavedPrompt | SpilledPrompt, tokens: int, seconds: float = 0.0) -> None:
        """Record a restore from `entry` (that took `seconds`, reading included): it becomes the
        most recently used."""
        for key, e in self._entries.items():
            if e is entry:
                self._entries.move_to_end(key)
                break
        self.hits += 1
        self.disk_hits += isinstance(entry, SpilledPrompt)
        self.tokens_restored += tokens
        self.restore_ms += seconds * 1000

    def spill(self, more: list[SavedPrompt]) -> int:
        """Write every entry, and `more` (what the free slots hold), to disk before the model is
        unloaded; returns how many were written."""
        if self.disk is None:
            return 0
        # The most recent first: an older conversation that a newer one extends adds nothing.
        entries = sorted([*more, *self._entries.values()], key=lambda e: -len(e.tokens))
        written = sum(self.disk.write(e.tokens, e.state) for e in entries)
        self.disk.trim()
        return written

    def stats(self) -> dict[str, float]:
        return {
            "entries": len(self._entries),
            "bytes": self.size,
            "limit": self.limit_bytes,
            "hits": self.hits,
            "tokens_restored": self.tokens_restored,
            "disk_hits": self.disk_hits,
            "restore_ms": round(self.restore_ms, 1),
            "disk_entries": len(self.disk.entries) if self.disk is not None else 0,
        }

    def _drop(self, key: int) -> None:
        self.size -= self._entries.pop(key).size
