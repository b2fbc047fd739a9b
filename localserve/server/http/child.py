"""A child process for the checks of a client's bytes that would hold the GIL too long. Python's
JSON decoder and `bytes` methods hold it for a whole call (16 MiB of escaped quotes: 55 ms for
one `replace`, 50 for the parse), and in a thread the event loop waits on each call again every
time it gives the GIL up, so a body of 16 MiB held /health 0.26 s. In a child, only the verdict
comes back.

Spawned, never forked: the daemon has threads, and a fork copies their locks as they are, held
ones too. Made at first use (about 0.5 s) and kept: idle, it and multiprocessing's resource
tracker hold about 70 MB. It ends with the daemon (watch_parent). Checks wait their turn: one
child is one core at most.
"""

from __future__ import annotations

import asyncio
import importlib
import multiprocessing
import os
import threading
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from multiprocessing.connection import wait
from typing import TypeVar

T = TypeVar("T")
# Added to the daemon's once the child has started: on a machine of few cores, a check of 16 MiB
# took a core from other clients' streams (their first token came 2 to 4 times later). Its start
# (0.5 s of imports) runs at the daemon's, or a busy machine would starve it for seconds.
NICENESS = 5


class Child:
    """One spawned process that runs module-level functions and hands back what they return."""

    def __init__(self, *modules: str) -> None:
        self._modules = modules  # what its functions need, imported before it yields the CPU
        self._pool: ProcessPoolExecutor | None = None

    async def run(self, fn: Callable[..., T], *args: object) -> T:
        """`fn(*args)` in the child: its result, or what it raised (picklable, as both must be)."""
        if self._pool is None:
            spawn = multiprocessing.get_context("spawn")
            self._pool = ProcessPoolExecutor(1, spawn, _started, (self._modules,))
        loop = asyncio.get_running_loop()
        try:
            return await loop.run_in_executor(self._pool, fn, *args)
        except BrokenProcessPool:
            self.close()  # a child killed (out of memory, say): the next check makes another
            raise

    def close(self) -> None:
        """Queued checks cancelled; a check under way ends on its own, and its child exits."""
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = None


def _started(modules: tuple[str, ...]) -> None:
    """The child's initializer."""
    for module in modules:
        importlib.import_module(module)
    os.nice(NICENESS)
    watch_parent()


def watch_parent() -> None:
    """The child's initializer: it ends when the daemon does, however that ends (kill -9 too).
    Its pool's queue is a pipe the child holds both ends of, so an idle child would otherwise
    wait on it for ever."""
    parent = multiprocessing.parent_process()
    if parent is not None:
        threading.Thread(target=_end_with, args=(parent.sentinel,), daemon=True).start()


def _end_with(sentinel: int) -> None:
    wait([sentinel])  # readable once the parent's end of it is closed: the parent is gone
    os._exit(0)
