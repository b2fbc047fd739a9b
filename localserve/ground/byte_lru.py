"""A least-recently-used cache bounded by the bytes it holds, not by its entries.

A cache keyed by what a client sent (a tool list's grammar, server/chat/grammar_pool.py and
backends/guides.py) cannot be bounded by a count: 64 entries of a few bytes and 64 of 16 MiB
are both 64. So each entry is weighed when it is put (`size`, the caller's measure of its key
and value), and the least recently used go until the total is within the budget again; an
entry heavier than the whole budget is not kept at all.

Thread-safe: the daemon fills it from its compiling threads, and the worker reads it from its
main thread and its engine thread.
"""

from __future__ import annotations

import sys
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable
from typing import Generic, TypeVar

K = TypeVar("K")
V = TypeVar("V")


def text_bytes(texts: Iterable[str]) -> int:
    """What some strings take in memory, as Python holds them (1 to 4 bytes a character)."""
    return sum(sys.getsizeof(t) for t in texts)


class ByteLRU(Generic[K, V]):
    def __init__(self, budget: int, size: Callable[[K, V], int]) -> None:
        self.budget = budget
        self._size = size
        self._entries: OrderedDict[K, tuple[V, int]] = OrderedDict()
        self._total = 0
        self._lock = threading.Lock()

    def get(self, key: K) -> V | None:
        """The value kept for `key`, now the most recently used; None when there is none."""
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                return None
            self._entries.move_to_end(key)
            return entry[0]

    def put(self, key: K, value: V) -> None:
        """Keep `value` for `key`, dropping the least recently used entries until every kept
        one fits the budget. A value heavier than the budget is not kept (nor is what it
        replaces)."""
        weight = self._size(key, value)
        with self._lock:
            old = self._entries.pop(key, None)
            if old is not None:
                self._total -= old[1]
            if weight > self.budget:
                return
            self._entries[key] = (value, weight)
            self._total += weight
            while self._total > self.budget:
                _, (_, dropped) = self._entries.popitem(last=False)
                self._total -= dropped

    @property
    def total(self) -> int:
        """The bytes the kept entries weigh, together."""
        return self._total

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, key: object) -> bool:
        return key in self._entries
