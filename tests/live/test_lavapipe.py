"""Placement and offload on a real Vulkan device: Mesa's lavapipe, a Vulkan driver that runs on
the CPU, seen by a Vulkan build of llama.cpp as a GPU (`gpu0`, ggml's Vulkan0).

The daemons here load llama.cpp from the Vulkan wheel that `localserve native build vulkan
--wheel-only` keeps (tests/support/vulkan_support.py). Without that wheel or without lavapipe the
module is skipped, saying which is missing; tests/unit/engine/residency/test_placement.py
specifies the same rules with fakes.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import ollama
import pytest

from localserve.engine.residency.placement import most_layers
from localserve.engine.residency.pools import MemoryPool
from localserve.engine.worker_client.sizing import layered_estimate
from localserve.ground.settings import Settings
from localserve.store.resolve import resolve
from tests.support import prerequisites, vulkan_support
from tests.support.daemons import get_json, resident, stats
from tests.support.residency_support import GEMMA, gemma_path  # noqa: F401  (a fixture)

SMOL = "smollm2"
PARALLEL, CTX = 2, 512
SETTINGS = Settings(parallel=PARALLEL, ctx=CTX)
ARGS = ["--parallel", str(PARALLEL), "--ctx", str(CTX), "--keep-alive", "-1"]
TOLERANCE = 0.15  # the bound on each device's estimate against llama.cpp's buffers


@pytest.fixture(scope="module")
def vulkan_env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """The environment of a daemon that loads the Vulkan build and sees lavapipe."""
    reason = vulkan_support.missing()
    if reason:
        prerequisites.missing(reason)
    return vulkan_support.vulkan_env(tmp_path_factory.mktemp("vulkan-lib"))


@pytest.fixture(scope="module")
def smol_estimate() -> Any:
    return layered_estimate(resolve(SMOL), SETTINGS)


def _model(url: str, name: str) -> dict[str, Any]:
    return resident(url)[name]


def _pool(url: str, device: str) -> dict[str, Any]:
    return next(p for p in stats(url)["pools"] if p["device"] == device)


def _within(estimate: int, actual: int) -> bool:
    return (1 - TOLERANCE) * actual <= estimate <= (1 + TOLERANCE) * actual


def _per_device(entry: dict[str, Any]) -> dict[str, tuple[int, int]]:
    """(estimate, llama.cpp's buffers) on each device: the estimate less what fills only later
    (the prompt cache, an embedding step's output rows)."""
    placement = entry["localserve"]["placement"]
    return {
        pool: (
            need["total"] - need["prompt_cache"] - need["embedding_output"],
            placement["actual"].get(pool, 0),
        )
        for pool, need in placement["split"].items()
    }


def test_doctor_lists_the_vulkan_device_its_memory_and_the_builds_backends(vulkan_env) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "localserve", "doctor", "--json"],
        capture_output=True,
        text=True,
        env={**os.environ, **vulkan_env},
        timeout=120,
    )
    llama = json.loads(done.stdout)["llama_cpp"]
    assert "Vulkan" in llama["backends"] and llama["gpu_offload"] is True
    (vulkan,) = [d for d in llama["devices"] if d["name"] == "Vulkan0"]
    assert "llvmpipe" in vulkan["description"] and vulkan["memory_total"] > 0


def test_smollm2_is_offloaded_whole_to_the_vulkan_device(daemon_factory, vulkan_env) -> None:
    _, url = daemon_factory(["--model", SMOL, *ARGS], env=vulkan_env)
    entry = _model(url, SMOL)
    placement = entry["localserve"]["placement"]
    assert (placement["device"], placement["gpu_layers"], placement["layers"]) == ("gpu0", 31, 31)
    assert entry["localserve"]["device"] == "gpu0"
    health = get_json(f"{url}/health")["devices"]
    assert health["gpu0"]["state"] == "running", "the model runs in the device's own worker"


def test_size_vram_equals_what_the_gpu_pool_reserved(daemon_factory, vulkan_env) -> None:
    _, url = daemon_factory(["--model", SMOL, *ARGS], env=vulkan_env)
    entry = _model(url, SMOL)
    gpu0 = _pool(url, "gpu0")
    assert entry["size_vram"] == gpu0["reserved"][SMOL] > 0
    assert entry["size"] == entry["size_vram"] + _pool(url, "cpu")["reserved"][SMOL]


def test_smollm2_is_half_offloaded_under_a_small_device_budget(
    daemon_factory, vulkan_env, smol_estimate
) -> None:
    budget = smol_estimate.split(15).device.total + (1 << 20)
    _, url = daemon_factory(
        ["--model", SMOL, *ARGS, "--memory-budget", f"gpu0={budget}"], env=vulkan_env
    )
    placement = _model(url, SMOL)["localserve"]["placement"]
    gpu0 = _pool(url, "gpu0")
    pool = MemoryPool("gpu0", budget, kind="gpu", max_tensor=gpu0["max_tensor"])
    assert placement["gpu_layers"] == most_layers(smol_estimate, pool, budget) == 15
    assert placement["split"]["gpu0"]["total"] <= budget == gpu0["budget"]


def _greedy(url: str, num_gpu: int) -> str:
    client = ollama.Client(host=url, timeout=300)
    answer = client.generate(
        model=SMOL,
        prompt="The capital of France is",
        options={"temperature": 0, "num_predict": 4, "num_gpu": num_gpu},
    )
    return answer["response"]


def test_the_first_greedy_tokens_on_the_device_match_the_cpus(daemon_factory, vulkan_env) -> None:
    _, url = daemon_factory(["--no-default-model", *ARGS], env=vulkan_env)
    on_cpu = _greedy(url, 0)
    assert _model(url, SMOL)["localserve"]["placement"]["device"] == "cpu"
    on_device = _greedy(url, 99)  # num_gpu past the layer count: everything, as in Ollama
    assert _model(url, SMOL)["localserve"]["placement"]["gpu_layers"] == 31
    # Floating-point sums differ between the kernels: later tokens may drift apart.
    assert on_device.split()[:1] == on_cpu.split()[:1] and on_cpu.strip(), (on_cpu, on_device)


def test_localserve_ps_says_where_each_model_lives(daemon_factory, vulkan_env, tmp_path) -> None:
    _, url = daemon_factory(["--model", SMOL, *ARGS], env=vulkan_env)
    host = url.removeprefix("http://")
    done = subprocess.run(
        [sys.executable, "-m", "localserve", "ps"],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "LOCALSERVE_HOST": host},
    )
    row = next(line for line in done.stdout.splitlines() if line.startswith(SMOL))
    assert "100% GPU" in row and "gpu0" in row, done.stdout


@pytest.fixture(scope="module")
def split_daemons(vulkan_env, gemma_path: str) -> Iterator[list[dict[str, Any]]]:
    """Both models whole on the device, split, and on the CPU alone, in three daemons."""
    from tests.support.daemons import stop_daemon
    from tests.support.live import start_daemon

    entries = []
    for extra in ([], ["--gpu-layers", "10"], ["--gpu-layers", "0"]):
        proc, url = start_daemon(
            ["--model", SMOL, "--model", gemma_path, *ARGS, *extra], env=vulkan_env
        )
        try:
            entries += [_model(url, SMOL), _model(url, GEMMA)]
        finally:
            stop_daemon(proc)
    yield entries


def test_each_devices_estimate_is_within_15_percent_of_llama_cpps_buffers(split_daemons) -> None:
    figures = {
        f"{e['name']} {e['localserve']['placement']['gpu_layers']} layers": _per_device(e)
        for e in split_daemons
    }
    report = "\n".join(
        f"{case} {pool}: estimate {est}, actual {act}, ratio {est / max(act, 1):.3f}"
        for case, pools in figures.items()
        for pool, (est, act) in pools.items()
    )
    assert {e["localserve"]["placement"]["gpu_layers"] for e in split_daemons} >= {0, 10, 19, 31}
    for pools in figures.values():
        for est, actual in pools.values():
            assert _within(est, actual), report


def test_a_draft_model_goes_to_the_device_with_its_whole_model(
    daemon_factory, vulkan_env, smol_estimate
) -> None:
    args = ["--model", SMOL, *ARGS, "--draft-model", f"{SMOL}={SMOL}", "--speculative", "4"]
    _, url = daemon_factory(args, env=vulkan_env)
    entry = _model(url, SMOL)
    assert entry["localserve"]["placement"]["gpu_layers"] == 31
    alone = smol_estimate.split(31, _pool(url, "gpu0")["max_tensor"]).device.total
    assert entry["size_vram"] > 1.9 * alone, "the draft, as large as its model, is there too"
    for pool, (estimate, actual) in _per_device(entry).items():
        assert _within(estimate, actual), (pool, estimate, actual)
    assert _greedy(url, 99).strip()
