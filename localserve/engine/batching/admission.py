"""Admission: the requests that wait for one model's batcher, and the rules they are let in by.

Every batcher keeps its waiting requests in an `AdmissionQueue`: generations in the GGUF
scheduler and the ONNX batcher, embedding inputs in the embedding lane. The worker's main thread
submits and cancels as the daemon asks; the device's engine thread takes. What can never run is
refused at once, before it waits: a prompt that leaves no room in a slot's context
(ContextOverflow, a 400), and a request that would wait past the queue's bound (QueueFull, a
503).

Cancelling is one flag on the request (`cancelled`), set by the batcher's `cancel`. Whatever of
the request still waits holds nothing but its place, so it leaves the queue at once; what runs
holds a slot or a row, and the engine thread reaps it at its next step.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable
from typing import Generic, Protocol, TypeVar

from localserve.ground.errors import ContextOverflow, QueueFull


class Cancellable(Protocol):
    """A request a client may give up on: a sequence, or an embeddings request."""

    cancelled: bool


class Admissible(Protocol):
    """What a queued item tells admission: its prompt's length and whether it was cancelled."""

    @property
    def prompt_tokens(self) -> int: ...

    @property
    def cancelled(self) -> bool: ...


T = TypeVar("T", bound=Admissible)


class AdmissionQueue(Generic[T]):
    """Items waiting for a batcher, oldest first, within a bound; safe across the two threads.

    `limit` is how many items may wait. A request larger than the whole bound (an embeddings
    request with many inputs) is still taken when nothing waits, else it would never be.
    `reserve` is the cells a slot must keep free past an item's prompt: one for a generation
    (its first new token), none for an embedding input.
    """

    def __init__(
        self,
        model: str,
        limit: int,
        n_ctx: int,
        reserve: int = 0,
        background: Callable[[T], bool] = lambda item: False,
    ) -> None:
        self.model = model
        self.limit = limit
        self.n_ctx = n_ctx
        self.reserve = reserve
        # An item's priority class (engine/batching/priorities.py): each class has its own
        # bound, so a flood of background requests never turns an interactive one away.
        self.background = background
        self._items: deque[T] = deque()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._items)

    # -- from the worker's main thread, as the daemon asks -----------------------------------

    def submit(self, items: list[T], field: str = "prompt") -> None:
        """Queue one request's items, all or none; raises ContextOverflow or QueueFull.

        `field` names the request field a ContextOverflow points at.
        """
        for item in items:
            if item.prompt_tokens + self.reserve > self.n_ctx:
                raise ContextOverflow(item.prompt_tokens, self.n_ctx, field)
        with self._lock:
            waiting = self._count(self.background(items[0])) if items else 0
            if waiting and waiting + len(items) > self.limit:
                raise QueueFull(self.model, self.limit)
            self._items.extend(items)

    def reap(self) -> list[T]:
        """Take out every item whose request was cancelled; from either thread."""
        return self.drop(lambda item: item.cancelled)

    # -- from the engine thread --------------------------------------------------------------

    def take(
        self, background: bool | None = None, first: Callable[[list[T]], T] | None = None
    ) -> T | None:
        """The oldest item (of that priority class, when one is named), or the one `first`
        picks out of that class's items, oldest first; out of the queue. None when nothing
        waits."""
        with self._lock:
            items = [
                i for i in self._items if background is None or self.background(i) == background
            ]
            if not items:
                return None
            item = first(items) if first is not None and len(items) > 1 else items[0]
            self._items.remove(item)
            return item

    def count(self, background: bool) -> int:
        """How many items of a priority class wait."""
        with self._lock:
            return self._count(background)

    def _count(self, background: bool) -> int:
        return sum(1 for item in self._items if self.background(item) == background)

    def head(self) -> T | None:
        """The oldest item, left in the queue; None when nothing waits."""
        with self._lock:
            return self._items[0] if self._items else None

    def put_back(self, items: list[T]) -> None:
        """Return items to the head, in their order, past the bound: they were admitted once."""
        with self._lock:
            self._items.extendleft(reversed(items))

    def drop(self, which: Callable[[T], bool]) -> list[T]:
        """Take out the items `which` picks (a failed request's); returns them."""
        with self._lock:
            dropped = [item for item in self._items if which(item)]
            if dropped:
                self._items = deque(item for item in self._items if not which(item))
        return dropped
