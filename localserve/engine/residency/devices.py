"""The devices this daemon's runtimes can use, found once at start, for the memory pools.

ggml reports its backend devices (name, kind, free and total memory); they are asked for in a
child process (native/build_info.py), because loading a GPU build means loading its driver, and
the daemon never runs native code of that kind. A CPU-only build has no GPU library beside its
libggml: then there is nothing to ask, and the daemon starts without the child's second.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

from localserve_native import build_info

log = logging.getLogger(__name__)

# ggml's GPU backends, by the library each build puts beside libggml.
GPU_LIBRARIES = ("vulkan", "cuda", "hip", "metal", "sycl", "opencl", "musa", "cann")
# llama-cpp-python's own switch: load the libraries from this folder instead of its own.
LIB_PATH_ENV = "LLAMA_CPP_LIB_PATH"


def library_dir() -> Path | None:
    """Where llama-cpp-python loads libllama and libggml from, without loading them."""
    override = os.environ.get(LIB_PATH_ENV)
    if override:
        return Path(override)
    try:
        import importlib.util

        spec = importlib.util.find_spec("llama_cpp")
    except (ImportError, ValueError):
        return None
    if spec is None or spec.origin is None:
        return None
    return Path(spec.origin).parent / "lib"


def has_gpu_backend(folder: Path | None) -> bool:
    if folder is None or not folder.is_dir():
        return False
    names = [p.name.lower() for p in folder.iterdir()]
    return any(f"ggml-{gpu}" in name for name in names for gpu in GPU_LIBRARIES)


def find_devices() -> list[build_info.Device]:
    """ggml's devices other than the CPU (which is always a pool of its own)."""
    if not has_gpu_backend(library_dir()):
        return []
    facts = build_info.query()
    if facts.get("errors", {}).get("devices"):
        log.warning("no GPU devices: %s", facts["errors"]["devices"])
        return []
    found = [
        build_info.Device(
            name=d["name"],
            kind=d["kind"],
            description=d.get("description", ""),
            memory_free=d.get("memory_free"),
            memory_total=d.get("memory_total"),
            max_tensor=d.get("max_tensor"),
        )
        for d in facts.get("devices") or []
        if d.get("kind") != "cpu"
    ]
    for device in found:
        log.info(
            "found %s (%s, %s): %s of %s free",
            device.name,
            device.description,
            device.kind,
            device.memory_free,
            device.memory_total,
        )
    return found
