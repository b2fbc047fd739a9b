"""Each grammar a request brings (its tools' or its answer format's) checked once, in a small
pool of threads of the daemon's own, within a deadline.

The check is llguidance's compile (structured.unenforced): milliseconds for an agent's two
dozen tools, a quarter of a second for 400 of them, and without a bound of its own for a
schema made to be slow. So:

- It runs in POOL_THREADS threads of this pool's own: never on the event loop, nor in the
  default pool, which tokenizing and header reads share. A slow compile delays other compiles
  only.
- A request waits for its verdict `timeout` seconds at most (the `compile_timeout` setting),
  counted from when it asks, so a wait for a busy pool counts too; then it is refused
  (server/http/grammars.py). A thread cannot be stopped: a compile past its deadline runs to
  its end and holds its thread meanwhile. So a few pathological grammars can hold the whole
  pool, and then the other clients' grammars wait in the queue and get a quick 400 at their
  deadline, rather than a request that hangs; the event loop and every request without a
  grammar go on untouched. A compile still queued when its last waiter gives up is cancelled:
  the queue holds only work someone waits for.
- Once per distinct grammar: a request whose grammar is being compiled waits for that
  compile, and each verdict is kept, in a cache bounded by the bytes of its grammars and
  verdicts (CACHE_BYTES), since an agent sends the same tools every turn. A compile that ends
  after its waiters gave up is kept too: the next request with its grammar has it at once.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from localserve.ground.byte_lru import ByteLRU, text_bytes
from localserve.ground.sampling import Grammar
from localserve.server.chat import structured

# What went unenforced, and why the grammar cannot compile at all (structured.unenforced).
Verdict = tuple[tuple[str, ...], str | None]

# Two: one pathological grammar leaves a thread for everyone else's.
POOL_THREADS = 2
# Verdicts kept, by the bytes of their grammars: an agent's tools make a grammar of tens of
# KB, so this holds hundreds of them, or a couple of the largest a body may carry.
CACHE_BYTES = 32 << 20


class CompileTimeout(Exception):
    """The grammar's verdict did not come within the deadline."""

    def __init__(self, timeout: float) -> None:
        super().__init__(f"no verdict within {timeout:g} s")
        self.timeout = timeout


@dataclass
class _Job:
    """One compile under way, and how many requests wait for it."""

    submitted: concurrent.futures.Future[Verdict]
    future: asyncio.Future[Verdict]
    waiting: int = 0


def _weight(grammar: Grammar, verdict: Verdict) -> int:
    dropped, failed = verdict
    return text_bytes((grammar.text, grammar.field, *grammar.dropped, *dropped, failed or ""))


class GrammarPool:
    """The daemon's compiling threads, and the verdicts they reached. Used from one event
    loop: `_running` is the loop's alone; the cache is filled from the threads."""

    def __init__(
        self,
        check: Callable[[Grammar], Verdict] = structured.unenforced,
        threads: int = POOL_THREADS,
        cache_bytes: int = CACHE_BYTES,
    ) -> None:
        self._check = check
        self._pool = ThreadPoolExecutor(threads, thread_name_prefix="localserve-grammar")
        self._cache: ByteLRU[Grammar, Verdict] = ByteLRU(cache_bytes, _weight)
        self._running: dict[Grammar, _Job] = {}

    async def verdict(self, grammar: Grammar, timeout: float | None) -> Verdict:
        """What `grammar` leaves unenforced, or why it cannot compile (structured.unenforced).
        Raises CompileTimeout when it does not come within `timeout` seconds (None: no
        deadline)."""
        kept = self._cache.get(grammar)
        if kept is not None:
            return kept
        job = self._running.get(grammar) or self._start(grammar)
        job.waiting += 1
        asked = time.monotonic()
        try:
            verdict = await asyncio.wait_for(asyncio.shield(job.future), timeout)
        except asyncio.TimeoutError:
            raise CompileTimeout(timeout or 0.0) from None
        finally:
            job.waiting -= 1
            # cancel() succeeds only for a compile no thread has started.
            if job.waiting == 0 and job.submitted.cancel():
                self._forget(grammar, job)
        # A busy loop can run a verdict's callback before the expired deadline's: the deadline
        # decides, not which of the two the loop reached first.
        if timeout is not None and time.monotonic() - asked > timeout:
            raise CompileTimeout(timeout)
        return verdict

    def _start(self, grammar: Grammar) -> _Job:
        submitted = self._pool.submit(self._compile, grammar)
        job = _Job(submitted, asyncio.wrap_future(submitted))
        self._running[grammar] = job
        job.future.add_done_callback(lambda _: self._forget(grammar, job))
        return job

    def _compile(self, grammar: Grammar) -> Verdict:
        """In a pool thread: kept before anyone is told, so a request that comes after it
        finds it in the cache."""
        verdict = self._check(grammar)
        self._cache.put(grammar, verdict)
        return verdict

    def _forget(self, grammar: Grammar, job: _Job) -> None:
        if self._running.get(grammar) is job:
            del self._running[grammar]
        if job.future.done() and not job.future.cancelled():
            job.future.exception()  # seen: a compile no one waits for now logs nothing

    @property
    def running(self) -> int:
        """Compiles under way or queued."""
        return len(self._running)

    @property
    def cache(self) -> ByteLRU[Grammar, Verdict]:
        return self._cache

    def close(self) -> None:
        """Queued compiles cancelled; one running ends on its own (a thread cannot be
        stopped)."""
        self._pool.shutdown(wait=False, cancel_futures=True)
