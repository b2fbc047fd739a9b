"""A request's grammar is checked once per distinct grammar, in the daemon's own small pool,
within a deadline that a wait for the busy pool counts toward (issue #57,
server/chat/grammar_pool.py). The compile here is a stand-in that waits to be let go, so each
test decides when a compile ends."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

import pytest

from localserve.ground.sampling import Grammar
from localserve.server.chat.grammar_pool import CompileTimeout, GrammarPool, Verdict

T = TypeVar("T")
QUICK = Grammar("json_schema", '{"type": "object"}', "response_format")
SLOW = Grammar("json_schema", '{"type": "string"}', "response_format")
WAIT_S = 10.0  # what a test waits for at most before it fails


class Compiles:
    """The check the pool runs: it counts each grammar it is given, and a compile of a grammar
    in `held` waits until the test lets it go."""

    def __init__(self, *held: Grammar) -> None:
        self.calls: list[Grammar] = []
        self.held = set(held)
        self.go = threading.Event()

    def __call__(self, grammar: Grammar) -> Verdict:
        self.calls.append(grammar)
        if grammar in self.held:
            assert self.go.wait(WAIT_S), "the test never let the compile go"
        return (f"checked {len(grammar.text)}",), None


def run(compiles: Compiles, test: Callable[[GrammarPool], Awaitable[T]], **pool: int) -> T:
    """`test` against a pool of its own, which is closed (and its compiles let go) after."""

    async def go() -> T:
        grammars = GrammarPool(compiles, **pool)
        try:
            return await test(grammars)
        finally:
            compiles.go.set()
            grammars.close()

    return asyncio.run(go())


async def until(done: Callable[[], bool]) -> None:
    deadline = time.monotonic() + WAIT_S
    while not done():
        assert time.monotonic() < deadline, "never happened"
        await asyncio.sleep(0.005)


def test_requests_that_bring_one_grammar_at_once_share_one_compile() -> None:
    compiles = Compiles(SLOW)

    async def test(grammars: GrammarPool) -> list[Verdict]:
        waiting = [asyncio.ensure_future(grammars.verdict(SLOW, WAIT_S)) for _ in range(3)]
        await until(lambda: len(compiles.calls) == 1)
        await asyncio.sleep(0.05)  # the other two asked meanwhile
        compiles.go.set()
        return list(await asyncio.gather(*waiting))

    verdicts = run(compiles, test)
    assert compiles.calls == [SLOW] and len(set(verdicts)) == 1


def test_a_grammar_checked_before_is_answered_from_the_cache() -> None:
    compiles = Compiles()

    async def test(grammars: GrammarPool) -> tuple[Verdict, Verdict]:
        return await grammars.verdict(QUICK, WAIT_S), await grammars.verdict(QUICK, WAIT_S)

    first, again = run(compiles, test)
    assert first == again and compiles.calls == [QUICK]


def test_a_compile_past_its_deadline_is_a_compile_timeout_at_the_deadline() -> None:
    compiles = Compiles(SLOW)

    async def test(grammars: GrammarPool) -> float:
        started = time.monotonic()
        with pytest.raises(CompileTimeout):
            await grammars.verdict(SLOW, 0.05)
        return time.monotonic() - started

    assert run(compiles, test) < 1.0


def test_the_wait_for_a_busy_pool_counts_toward_the_deadline() -> None:
    compiles = Compiles(SLOW)

    async def test(grammars: GrammarPool) -> None:
        holding = asyncio.ensure_future(grammars.verdict(SLOW, WAIT_S))
        await until(lambda: compiles.calls == [SLOW])  # the pool's one thread is taken
        with pytest.raises(CompileTimeout):
            await grammars.verdict(QUICK, 0.05)  # a quick compile, never started
        compiles.go.set()
        await holding

    run(compiles, test, threads=1)
    # Its waiter gone, the queued compile was cancelled, not run once the pool was free.
    assert compiles.calls == [SLOW]


def test_a_compile_that_ends_after_its_deadline_answers_the_next_request() -> None:
    compiles = Compiles(SLOW)

    async def test(grammars: GrammarPool) -> Verdict:
        with pytest.raises(CompileTimeout):
            await grammars.verdict(SLOW, 0.05)
        compiles.go.set()
        await until(lambda: SLOW in grammars.cache)
        compiles.go.clear()  # a second compile would wait, and time out
        return await grammars.verdict(SLOW, 0.05)

    assert run(compiles, test) == (("checked 18",), None)
    assert compiles.calls == [SLOW]


def test_a_waiter_that_leaves_leaves_the_compile_to_the_others() -> None:
    compiles = Compiles(SLOW)

    async def test(grammars: GrammarPool) -> Verdict:
        leaving = asyncio.ensure_future(grammars.verdict(SLOW, WAIT_S))
        staying = asyncio.ensure_future(grammars.verdict(SLOW, WAIT_S))
        await until(lambda: compiles.calls == [SLOW])
        leaving.cancel()
        compiles.go.set()
        return await staying

    assert run(compiles, test) == (("checked 18",), None)


def test_verdicts_are_kept_within_the_cache_bytes() -> None:
    compiles = Compiles()
    big = [Grammar("lark", f"start: {i} " + "x" * 4000, "tools") for i in range(3)]

    async def test(grammars: GrammarPool) -> int:
        for grammar in big:
            await grammars.verdict(grammar, WAIT_S)
        assert grammars.cache.total <= 10_000 and big[0] not in grammars.cache
        await grammars.verdict(big[0], WAIT_S)  # dropped for room, so compiled again
        return grammars.running

    assert run(compiles, test, cache_bytes=10_000) == 0
    assert compiles.calls == [*big, big[0]]
