"""Reloads a request's options ask for, which no client can storm (#57): at most one a
`reload_interval` per model, a drain bounded by `max_pass_over`, and a grown context kept.
Specified with a fake loader and pools; the models are those of test_placement.py (10 layers
of 100 bytes and the output). tests/live/test_reload_storms.py shows them on a real daemon."""

from __future__ import annotations

import asyncio

from localserve.ground.pin import Pin
from tests.unit.engine.residency.test_placement import manager, run, use


def test_a_reload_its_running_requests_outlast_is_given_up_and_the_request_runs_as_loaded():
    async def scenario() -> None:
        m, loader = manager(gpu_budget=2000, max_pass_over=0.1)
        async with m.acquire("a"):
            async with m.acquire("a", pin=Pin(gpu_layers=2)) as model:
                assert model.placement.gpu_layers == 11 and not model.draining
                assert "runs as the model is loaded (gpu0, 11 GPU layers" in (
                    m.deferred(model, Pin(gpu_layers=2)) or ""
                )
        assert loader.loads == ["a"] and loader.unloads == []

    run(scenario)


def test_a_second_reload_within_the_interval_runs_as_loaded():
    async def scenario() -> None:
        m, loader = manager(gpu_budget=2000, reload_interval=60)
        await use(m, "a")
        await use(m, "a", Pin(gpu_layers=2))
        await use(m, "a", Pin(gpu_layers=3))
        assert loader.loads == ["a", "a"] and loader.placements["a"].gpu_layers == 2

    run(scenario)


def test_after_the_interval_options_reload_the_model_again():
    async def scenario() -> None:
        m, loader = manager(gpu_budget=2000, reload_interval=0.05)
        await use(m, "a")
        await use(m, "a", Pin(gpu_layers=2))
        await asyncio.sleep(0.06)
        await use(m, "a", Pin(gpu_layers=3))
        assert loader.loads == ["a"] * 3 and loader.placements["a"].gpu_layers == 3

    run(scenario)


def test_twenty_requests_alternating_num_gpu_on_a_gpu_reload_the_model_once():
    async def scenario() -> None:
        m, loader = manager(gpu_budget=2000, reload_interval=60)
        for i in range(20):
            await use(m, "a", Pin(gpu_layers=1 + i % 2))
        assert loader.loads == ["a", "a"]

    run(scenario)


def test_a_request_waiting_behind_a_reload_that_is_given_up_is_served():
    async def scenario() -> None:
        m, loader = manager(gpu_budget=2000, max_pass_over=0.1, load_timeout=0.5)
        async with m.acquire("a"):  # a long answer the reload cannot outwait
            reload = asyncio.create_task(use(m, "a", Pin(gpu_layers=2)))
            await asyncio.sleep(0.02)
            assert m.get("a").draining
            async with m.acquire("a") as model:  # another client's: never a ModelBusy
                assert model.placement.gpu_layers == 11
            await reload
        assert loader.loads == ["a"]

    run(scenario)


def test_a_reload_for_layers_keeps_the_context_an_earlier_reload_grew():
    async def scenario() -> None:
        m, loader = manager(gpu_budget=2000, reload_interval=0)
        await use(m, "a")
        await use(m, "a", Pin(ctx=16384))
        await use(m, "a", Pin(gpu_layers=2))
        assert loader.placements["a"].pin == Pin(gpu_layers=2, ctx=16384)

    run(scenario)


def test_one_request_reloads_at_most_once_even_where_the_reload_cannot_answer_it():
    async def scenario() -> None:
        m, loader = manager(gpu_budget=2000, reload_interval=0)
        await use(m, "a")
        await use(m, "a", Pin(ctx=16384))  # the fake's models load no context at all
        assert loader.loads == ["a", "a"]

    run(scenario)
