"""Placement across the CPU's pool and GPU pools, specified with a fake loader and fake pools.

Every model here has 10 layers and an output layer of 100 bytes each (weights only), so `k`
offloaded layers need `k * 100` bytes on the GPU, and the whole model 1100.
tests/live/test_lavapipe.py proves the same wiring on a real Vulkan device.
"""

from __future__ import annotations

import asyncio
from dataclasses import replace
from typing import Any

import pytest

from localserve.engine.residency.manager import ModelManager
from localserve.engine.residency.placement import most_layers, place
from localserve.engine.residency.pools import device_pools, gpu_headroom
from localserve.ground.errors import BadRequest
from localserve.ground.pin import Pin
from localserve.ground.units import GiB
from localserve_native.build_info import Device
from tests.support.fakes import (
    FakeLibrary,
    FakeLoader,
    fake_gpu,
    fake_pool,
    layers_model,
    manager_settings,
)

WHOLE = 1100  # 10 layers and the output, 100 bytes each


def manager(gpu_budget: int, cpu_budget: int = 10_000, **settings: Any):
    loader = FakeLoader({})
    for name in ("a", "b", "c"):
        loader.layered[name] = layers_model(100)
    pools = [fake_pool(cpu_budget), fake_gpu(gpu_budget)]
    m = ModelManager(manager_settings(**settings), loader, FakeLibrary(), pools)
    return m, loader


def run(scenario: Any) -> None:
    asyncio.run(asyncio.wait_for(scenario(), timeout=5))


NO_PIN = Pin()


async def use(m: ModelManager, name: str, pin: Pin = NO_PIN) -> None:
    async with m.acquire(name, pin=pin):
        pass


def test_a_model_that_fits_whole_goes_to_the_gpu_pool() -> None:
    async def scenario() -> None:
        m, loader = manager(gpu_budget=2000)
        await use(m, "a")
        placed = loader.placements["a"]
        assert (placed.device, placed.gpu_layers) == ("gpu0", 11)
        assert m.pools["gpu0"].reserved == {"a": WHOLE}
        assert m.pools["cpu"].reserved == {"a": 0}

    run(scenario)


def test_a_model_that_does_not_fit_gets_the_largest_layer_count_that_does() -> None:
    async def scenario() -> None:
        m, loader = manager(gpu_budget=750)
        await use(m, "a")
        placed = loader.placements["a"]
        assert (placed.device, placed.gpu_layers) == ("gpu0", 7)
        assert m.pools["gpu0"].reserved == {"a": 700}
        assert m.pools["cpu"].reserved == {"a": 400}, "the other four layers stay on the CPU"

    run(scenario)


def test_offload_takes_the_output_layer_first_then_the_last_layers_as_llama_cpp_does() -> None:
    estimate = replace(
        layers_model(0, n_layers=4, input_weights=50), layer_weights=(1, 2, 4, 8), output_weights=16
    )
    split = estimate.split(2)
    assert (split.device.weights, split.host.weights) == (16 + 8, 50 + 1 + 2 + 4)
    split = estimate.split(5)
    assert (split.device.weights, split.host.weights) == (31, 50)


def test_a_draft_model_is_on_the_device_only_when_its_whole_model_is() -> None:
    draft = layers_model(10, n_layers=2)  # 30 bytes, all of it offloaded at 3 layers
    alone = layers_model(100, n_layers=4)
    estimate = replace(alone, draft=draft)
    for layers in (0, 2, 4):
        with_draft, without = estimate.split(layers), alone.split(layers)
        assert with_draft.host.total == without.host.total + draft.whole.total
        assert with_draft.device == without.device
    with_draft, without = estimate.split(5), alone.split(5)
    assert with_draft.device.total == without.device.total + draft.split(3).device.total
    assert with_draft.host.total == without.host.total + draft.split(3).host.total


def test_a_model_with_its_draft_on_a_full_device_offloads_one_layer_less() -> None:
    estimate = replace(layers_model(100, n_layers=4), draft=layers_model(100, n_layers=4))
    room = estimate.split(4).device.total  # not the draft's share on top of the whole model
    pool = fake_gpu(room)
    assert most_layers(estimate, pool, room) == 4


def test_an_output_layer_larger_than_the_device_takes_stays_on_the_host() -> None:
    estimate = replace(layers_model(10, n_layers=4), output_weights=500, output_largest=500)
    split = estimate.split(5, max_tensor=100)
    assert not split.output_on_device
    assert (split.device.weights, split.host.weights) == (40, 500)


def test_an_idle_model_on_the_gpu_is_evicted_before_offload_is_reduced() -> None:
    async def scenario() -> None:
        m, loader = manager(gpu_budget=1500)
        await use(m, "a")  # whole on the GPU, then idle
        await use(m, "b")
        assert loader.unloads == ["a"]
        assert loader.placements["b"].gpu_layers == 11
        assert m.pools["gpu0"].reserved == {"b": WHOLE}

    run(scenario)


def test_a_busy_model_on_the_gpu_is_never_evicted_and_the_newcomer_is_partly_offloaded() -> None:
    async def scenario() -> None:
        m, loader = manager(gpu_budget=1500)
        async with m.acquire("a"):
            await use(m, "b")
        assert loader.unloads == []
        assert loader.placements["b"].gpu_layers == 4, "1500 - 1100 leaves room for 4 layers"

    run(scenario)


def test_a_pinned_layer_count_wins_over_what_fits() -> None:
    async def scenario() -> None:
        m, loader = manager(gpu_budget=2000)
        await use(m, "a", Pin(gpu_layers=3))
        assert loader.placements["a"].gpu_layers == 3
        assert m.pools["gpu0"].reserved == {"a": 300}

    run(scenario)


def test_a_pinned_device_wins_over_the_fastest() -> None:
    async def scenario() -> None:
        m, loader = manager(gpu_budget=2000)
        await use(m, "a", Pin(device="cpu"))
        assert loader.placements["a"].device == "cpu"
        assert m.pools["gpu0"].reserved == {}

    run(scenario)


def test_the_gpu_layers_setting_applies_to_every_model_a_request_does_not_pin() -> None:
    async def scenario() -> None:
        m, loader = manager(gpu_budget=2000, gpu_layers=0)
        await use(m, "a")
        await use(m, "b", Pin(gpu_layers=5))
        assert loader.placements["a"].device == "cpu"
        assert loader.placements["b"].gpu_layers == 5

    run(scenario)


def test_a_request_pinning_another_layer_count_reloads_the_model() -> None:
    async def scenario() -> None:
        m, loader = manager(gpu_budget=2000)
        await use(m, "a")
        await use(m, "a", Pin(gpu_layers=2))
        await use(m, "a")  # no pin: whatever it has now serves
        assert loader.loads == ["a", "a"]
        assert loader.placements["a"].gpu_layers == 2

    run(scenario)


def test_a_pin_of_more_layers_than_the_model_has_means_all_of_them() -> None:
    async def scenario() -> None:
        m, loader = manager(gpu_budget=2000)
        await use(m, "a", Pin(gpu_layers=999))
        await use(m, "a", Pin(gpu_layers=999))
        assert loader.loads == ["a"] and loader.placements["a"].gpu_layers == 11

    run(scenario)


def test_the_fastest_gpu_that_holds_the_model_whole_is_preferred() -> None:
    pools = [fake_pool(10_000), fake_gpu(500, "gpu0"), fake_gpu(2000, "gpu1")]
    placed = place(layers_model(100), pools, lambda p: p.free)
    assert (placed.device, placed.gpu_layers) == ("gpu1", 11)
    pools[1].budget = 5000
    assert place(layers_model(100), pools, lambda p: p.free).device == "gpu0"


def test_a_model_that_fits_no_gpu_at_all_stays_on_the_cpu() -> None:
    pools = [fake_pool(10_000), fake_gpu(50)]
    placed = place(layers_model(100), pools, lambda p: p.free)
    assert (placed.device, placed.gpu_layers, placed.total) == ("cpu", 0, WHOLE)


def test_a_pin_naming_a_device_that_is_not_here_is_a_bad_request() -> None:
    with pytest.raises(BadRequest, match="no device 'gpu7' here; the devices are cpu, gpu0"):
        place(layers_model(100), [fake_pool(10), fake_gpu(10)], lambda p: p.free, Pin("gpu7"))


# -- the pools a machine's devices make -----


def _gpu(name: str, free: int, kind: str = "gpu") -> Device:
    return Device(name, f"{name} card", kind, memory_total=free + GiB, memory_free=free)


def test_every_gpu_gets_a_pool_after_the_cpus_discrete_before_integrated_then_by_free_memory():
    pools = device_pools(
        [_gpu("Vulkan0", 2 * GiB, "igpu"), _gpu("Vulkan1", 4 * GiB), _gpu("Vulkan2", 8 * GiB)],
        {"cpu": GiB},
    )
    assert [(p.device, p.backend_device) for p in pools] == [
        ("cpu", None),
        ("gpu0", "Vulkan2"),
        ("gpu1", "Vulkan1"),
        ("gpu2", "Vulkan0"),
    ]


def test_a_gpu_budget_defaults_to_its_free_memory_less_a_headroom():
    (_, gpu) = device_pools([_gpu("CUDA0", 8 * GiB)], {"cpu": GiB})
    assert gpu.budget == 8 * GiB - gpu_headroom(9 * GiB)


def test_a_budget_per_device_overrides_the_default():
    (cpu, gpu) = device_pools([_gpu("CUDA0", 8 * GiB)], {"cpu": 3 * GiB, "gpu0": GiB})
    assert (cpu.budget, gpu.budget) == (3 * GiB, GiB)


def test_a_budget_for_a_device_that_is_not_here_is_refused():
    with pytest.raises(ValueError, match="names gpu1, but this machine's devices are cpu, gpu0"):
        device_pools([_gpu("CUDA0", 8 * GiB)], {"gpu1": GiB})


def test_the_cpu_device_ggml_reports_is_not_a_gpu_pool():
    assert [p.device for p in device_pools([Device("CPU", "AMD EPYC", "cpu")], {"cpu": GiB})] == [
        "cpu"
    ]


# -- pins that cannot take effect (#57: reloads no client can storm) ---------------------------


def cpu_only_manager(**settings: Any):
    loader = FakeLoader({})
    loader.layered["a"] = layers_model(100)
    m = ModelManager(manager_settings(**settings), loader, FakeLibrary(), [fake_pool(10_000)])
    return m, loader


def test_layer_counts_on_a_machine_without_a_gpu_reload_nothing() -> None:
    async def scenario() -> None:
        m, loader = cpu_only_manager()
        for i in range(20):  # Ollama's num_gpu, alternating
            await use(m, "a", Pin(gpu_layers=1 + i % 2))
        assert loader.loads == ["a"] and loader.unloads == []

    run(scenario)


def test_a_device_that_is_not_here_is_refused_before_the_model_is_drained() -> None:
    async def scenario() -> None:
        m, loader = manager(gpu_budget=2000)
        await use(m, "a")
        with pytest.raises(BadRequest, match="no device 'gpu3' here"):
            await use(m, "a", Pin("gpu3"))
        assert loader.unloads == [] and not m.get("a").draining
        await use(m, "a")
        assert loader.loads == ["a"]

    run(scenario)
