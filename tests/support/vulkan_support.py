"""The Vulkan build of llama.cpp, for daemons that offload to Mesa's lavapipe (a Vulkan driver
that runs on the CPU, which a Vulkan build sees as a GPU). Shared by tests/live/test_lavapipe.py and
benchmarks/bench_offload.py.

The wheel is the one `localserve native build vulkan --wheel-only` keeps (.ci/run builds it once
per machine); its libraries are unpacked into a folder that llama-cpp-python's LLAMA_CPP_LIB_PATH
names, so the venv's own CPU build stays installed. ggml hides CPU-type Vulkan devices unless
GGML_VK_VISIBLE_DEVICES names them.
"""

from __future__ import annotations

import zipfile
from pathlib import Path

from localserve_native import recipes

LAVAPIPE_ICDS = (
    "/usr/share/vulkan/icd.d/lvp_icd.x86_64.json",
    "/usr/share/vulkan/icd.d/lvp_icd.json",
)


def missing() -> str | None:
    """Why no daemon here can offload to lavapipe, or None."""
    if recipes.cached_wheel(recipes.plan(recipes.recipes()["vulkan"])) is None:
        return (
            "no Vulkan build of llama-cpp-python is kept here: run "
            "`localserve native build vulkan --wheel-only` (.ci/run does)"
        )
    if not any(Path(p).exists() for p in LAVAPIPE_ICDS):
        return "Mesa's lavapipe is not installed (Debian: mesa-vulkan-drivers)"
    return None


def vulkan_env(folder: Path) -> dict[str, str]:
    """The environment of a daemon that loads the Vulkan build (unpacked into `folder`) and
    sees lavapipe as gpu0."""
    wheel = recipes.cached_wheel(recipes.plan(recipes.recipes()["vulkan"]))
    assert wheel is not None, missing()
    with zipfile.ZipFile(wheel) as archive:
        for member in archive.namelist():
            if member.startswith("llama_cpp/lib/"):
                archive.extract(member, folder)
    return {"LLAMA_CPP_LIB_PATH": str(folder / "llama_cpp" / "lib"), "GGML_VK_VISIBLE_DEVICES": "0"}
