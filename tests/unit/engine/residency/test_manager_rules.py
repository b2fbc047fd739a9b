"""The residency rules of the ModelManager, specified with a fake loader, library and pool.

Each test runs in milliseconds; tests/live/test_residency.py proves the same wiring with real
models.
Every fake model weighs 100 bytes unless a test says otherwise.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from localserve.engine.residency.manager import ModelManager
from localserve.ground.errors import DoesNotFit, LoadFailed, ModelBusy
from tests.support.fakes import FakeLibrary, FakeLoader, fake_pool, manager_settings


def manager(budget: int = 1000, sizes: dict[str, int] | None = None, **settings: Any):
    loader = FakeLoader(sizes or {})
    m = ModelManager(manager_settings(**settings), loader, FakeLibrary(), [fake_pool(budget)])
    return m, loader


def run(test: Callable[[], Awaitable[None]]) -> None:
    asyncio.run(asyncio.wait_for(test(), timeout=5))


async def use(m: ModelManager, name: str, *keep_alive: float | None) -> None:
    async with m.acquire(name, *keep_alive):
        pass


async def settled(check: Callable[[], bool], timeout: float = 2.0) -> None:
    for _ in range(int(timeout / 0.01)):
        if check():
            return
        await asyncio.sleep(0.01)
    raise AssertionError("the manager never settled")


def resident(m: ModelManager) -> set[str]:
    return {model.name for model in m.models}


def test_the_least_recently_used_idle_model_is_evicted_first() -> None:
    async def scenario() -> None:
        m, loader = manager(budget=250)
        await use(m, "a")
        await use(m, "b")
        await use(m, "a")
        await use(m, "c")
        assert loader.unloads == ["b"]
        assert resident(m) == {"a", "c"}

    run(scenario)


def test_a_pinned_model_is_never_evicted_and_the_other_request_gets_model_busy() -> None:
    async def scenario() -> None:
        m, loader = manager(budget=150, load_timeout=0.2)
        await use(m, "a")
        m.pin("a", True)
        with pytest.raises(ModelBusy, match="pinned models: a"):
            await use(m, "b")
        assert loader.unloads == [] and resident(m) == {"a"}

    run(scenario)


def test_a_model_with_a_request_in_flight_is_evicted_only_once_it_ends() -> None:
    async def scenario() -> None:
        m, loader = manager(budget=150)
        release = asyncio.Event()

        async def long_request() -> None:
            async with m.acquire("a"):
                await release.wait()

        holder = asyncio.create_task(long_request())
        await settled(lambda: m.get("a") is not None and m.get("a").in_flight == 1)
        other = asyncio.create_task(use(m, "b"))
        await asyncio.sleep(0.2)
        assert not other.done() and loader.unloads == [], "a busy model is never evicted"
        release.set()
        await asyncio.gather(holder, other)
        assert loader.unloads == ["a"] and resident(m) == {"b"}

    run(scenario)


def test_a_model_with_queued_work_is_not_idle_and_so_not_evicted() -> None:
    async def scenario() -> None:
        m, loader = manager(budget=150, load_timeout=2.0)
        await use(m, "a")
        m.get("a").runner.batcher.busy = 1  # a cancelled sequence not yet reaped, say
        other = asyncio.create_task(use(m, "b"))
        await asyncio.sleep(0.2)
        assert not other.done() and loader.unloads == []
        m.get("a").runner.batcher.busy = 0
        await other
        assert loader.unloads == ["a"]

    run(scenario)


def test_past_the_pass_over_bound_the_model_in_the_way_stops_taking_requests() -> None:
    async def scenario() -> None:
        m, loader = manager(budget=150, max_pass_over=0.2, load_timeout=2.0)
        release = asyncio.Event()

        async def long_request() -> None:
            async with m.acquire("a"):
                await release.wait()

        holder = asyncio.create_task(long_request())
        await settled(lambda: m.get("a") is not None)
        swap = asyncio.create_task(use(m, "b"))
        await asyncio.sleep(0.1)
        assert not m.get("a").draining, "within the bound, the resident model keeps serving"
        await settled(lambda: m.get("a").draining, timeout=0.5)
        late = asyncio.create_task(use(m, "a"))
        await asyncio.sleep(0.1)
        assert not late.done(), "a draining model takes no new request"
        release.set()
        await asyncio.gather(holder, swap, late)
        assert loader.loads == ["a", "b", "a"], "the swap goes first, then the late request"

    run(scenario)


def test_a_model_just_loaded_is_not_evictable_until_its_waiting_requests_take_it() -> None:
    async def scenario() -> None:
        # Its requesters resume a moment after the load; a request for another model that
        # runs in between (one whose estimate just came back, say) must not evict it.
        m, _ = manager(budget=150)
        seen: list[bool] = []
        load = m._load

        async def load_and_look(*args: Any) -> Any:
            model = await load(*args)
            seen.append(m._evictable(model))
            return model

        m._load = load_and_look  # type: ignore[method-assign]
        async with m.acquire("b") as model:
            assert not m._evictable(model)  # held now
        assert seen == [False]
        assert m._evictable(m.get("b"))  # idle, nobody waiting: evictable again

    run(scenario)


def test_a_request_whose_model_goes_before_it_can_take_it_gets_a_fresh_load() -> None:
    async def scenario() -> None:
        m, loader = manager(budget=150)
        load = m._load

        async def load_then_lose(*args: Any) -> Any:
            model = await load(*args)
            if loader.loads == ["b"]:
                m._lost(["b"], "the worker died")  # between the load and the request
            return model

        m._load = load_then_lose  # type: ignore[method-assign]
        async with m.acquire("b") as model:
            assert m.get("b") is model, "the request got a model that was no longer loaded"
        assert loader.loads == ["b", "b"]

    run(scenario)


def test_keep_alive_zero_unloads_the_model_when_its_request_ends() -> None:
    async def scenario() -> None:
        m, loader = manager()
        await use(m, "a", 0)
        await settled(lambda: loader.unloads == ["a"])
        await settled(lambda: m.pools["cpu"].used == 0)

    run(scenario)


def test_a_negative_keep_alive_keeps_the_model_for_ever() -> None:
    async def scenario() -> None:
        m, loader = manager(keep_alive=0.05)
        await use(m, "a", None)
        await asyncio.sleep(0.2)
        assert resident(m) == {"a"} and m.get("a").expires_at is None

    run(scenario)


def test_an_idle_model_is_unloaded_when_its_keep_alive_runs_out() -> None:
    async def scenario() -> None:
        m, loader = manager(keep_alive=0.05)
        await use(m, "a")
        assert m.get("a").expires_at is not None
        await settled(lambda: loader.unloads == ["a"])

    run(scenario)


def test_concurrent_first_requests_for_a_model_load_it_once() -> None:
    async def scenario() -> None:
        m, loader = manager()
        loader.gate.clear()
        requests = [asyncio.create_task(use(m, "a")) for _ in range(10)]
        await asyncio.sleep(0.05)
        loader.gate.set()
        await asyncio.gather(*requests)
        assert loader.loads == ["a"] and m.load_counts == {"a": 1}

    run(scenario)


def test_a_request_that_leaves_during_a_load_does_not_cancel_it_for_the_others() -> None:
    async def scenario() -> None:
        m, loader = manager()
        loader.gate.clear()
        leaving = asyncio.create_task(m.ensure("a"))
        staying = asyncio.create_task(m.ensure("a"))
        await asyncio.sleep(0.05)
        leaving.cancel()
        loader.gate.set()
        model = await staying
        assert model.name == "a" and loader.loads == ["a"]

    run(scenario)


def test_a_model_larger_than_the_whole_budget_does_not_fit_and_is_never_loaded() -> None:
    async def scenario() -> None:
        m, loader = manager(budget=150, sizes={"big": 200})
        with pytest.raises(DoesNotFit, match="needs 200 B but the cpu memory budget is 150 B"):
            await use(m, "big")
        assert loader.loads == [] and m.pools["cpu"].used == 0

    run(scenario)


def test_max_loaded_models_caps_how_many_stay_resident() -> None:
    async def scenario() -> None:
        m, loader = manager(max_loaded_models=1)
        await use(m, "a")
        await use(m, "b")
        assert loader.unloads == ["a"] and resident(m) == {"b"}

    run(scenario)


def test_an_evicted_models_memory_returns_to_the_pool_only_once_it_is_freed() -> None:
    async def scenario() -> None:
        m, loader = manager()
        await use(m, "a")
        assert m.pools["cpu"].reserved == {"a": 100}
        unloaded = asyncio.Event()
        loop = asyncio.get_running_loop()
        real_unload = loader.unload

        def slow_unload(model: Any) -> None:
            asyncio.run_coroutine_threadsafe(unloaded.wait(), loop).result(timeout=5)
            real_unload(model)

        loader.unload = slow_unload  # type: ignore[method-assign]
        await m.unload("a")
        await asyncio.sleep(0.05)
        assert m.get("a") is None and m.pools["cpu"].reserved == {"a": 100}
        unloaded.set()
        await settled(lambda: m.pools["cpu"].reserved == {})

    run(scenario)


def test_a_failed_load_gives_its_reservation_back() -> None:
    async def scenario() -> None:
        m, loader = manager()

        def broken(ref: Any, need: Any) -> Any:
            raise LoadFailed("the file is broken")

        loader.load = broken  # type: ignore[method-assign]
        with pytest.raises(LoadFailed):
            await use(m, "a")
        assert m.pools["cpu"].used == 0 and resident(m) == set()

    run(scenario)
