"""The llama.cpp build that llama-cpp-python installed: its version, what ggml was compiled with
(`llama_print_system_info()`), whether it can offload layers to a GPU, and ggml's backend devices.

`query()` asks in a child process: a build compiled for another CPU can die of SIGILL as soon as
its library loads, and a report about such a build must outlive it. The functions it calls are
usable in-process too (the load probe's cache key needs `system_info()`).
"""

from __future__ import annotations

import ctypes
import json
import re
import signal
import subprocess
import sys
from dataclasses import asdict, dataclass
from importlib import metadata
from typing import Any

DISTRIBUTION = "llama-cpp-python"
QUERY_TIMEOUT_S = 60.0  # importing a CUDA build and opening its devices takes seconds

PARTS = ("version", "system_info", "gpu_offload", "devices")

# ggml-backend.h's enum ggml_backend_dev_type, in order.
_DEVICE_KINDS = ("cpu", "gpu", "igpu", "accel", "meta")


@dataclass(frozen=True)
class Device:
    name: str
    description: str
    kind: str
    memory_total: int | None = None
    memory_free: int | None = None


def version() -> str:
    """From the package's metadata: no need to load the library for it."""
    return metadata.version(DISTRIBUTION)


def system_info() -> str:
    import llama_cpp

    return llama_cpp.llama_print_system_info().decode("utf-8", errors="replace").strip()


def gpu_offload() -> bool:
    import llama_cpp

    return bool(llama_cpp.llama_supports_gpu_offload())


def compiled_features(info: str) -> dict[str, str]:
    """`CPU : SSE3 = 1 | AVX2 = 1 | AMX_INT8 = 1 | ...` as {"SSE3": "1", ...}, all backends."""
    return dict(re.findall(r"(\w+) = (\w+)", info))


def devices() -> list[Device]:
    """ggml's backend devices. llama-cpp-python 0.3.36 binds none of ggml's device functions, so
    they are looked up in the libggml it loads; AttributeError when a build lacks them."""
    from llama_cpp import _ggml

    lib = _ggml.libggml
    # Indexing makes fresh function objects: setting their types leaves llama_cpp's own alone.
    count = lib["ggml_backend_dev_count"]
    count.argtypes, count.restype = [], ctypes.c_size_t
    get = lib["ggml_backend_dev_get"]
    get.argtypes, get.restype = [ctypes.c_size_t], ctypes.c_void_p
    name, description = lib["ggml_backend_dev_name"], lib["ggml_backend_dev_description"]
    for text in (name, description):
        text.argtypes, text.restype = [ctypes.c_void_p], ctypes.c_char_p
    kind = lib["ggml_backend_dev_type"]
    kind.argtypes, kind.restype = [ctypes.c_void_p], ctypes.c_int
    memory = lib["ggml_backend_dev_memory"]
    size_p = ctypes.POINTER(ctypes.c_size_t)
    memory.argtypes, memory.restype = [ctypes.c_void_p, size_p, size_p], None

    found = []
    for index in range(count()):
        device = get(index)
        if not device:
            continue
        free, total = ctypes.c_size_t(0), ctypes.c_size_t(0)
        memory(device, ctypes.byref(free), ctypes.byref(total))
        k = kind(device)
        found.append(
            Device(
                name=(name(device) or b"").decode(errors="replace"),
                description=(description(device) or b"").decode(errors="replace"),
                kind=_DEVICE_KINDS[k] if 0 <= k < len(_DEVICE_KINDS) else str(k),
                memory_total=total.value or None,
                memory_free=free.value or None,
            )
        )
    return found


def facts() -> dict[str, Any]:
    """Everything above, each part on its own: a part that fails is None, and `errors` says why
    (a binding this build lacks, a library that will not load)."""
    calls = {
        "version": version,
        "system_info": system_info,
        "gpu_offload": gpu_offload,
        "devices": lambda: [asdict(d) for d in devices()],
    }
    found: dict[str, Any] = {}
    errors: dict[str, str] = {}
    for part, call in calls.items():
        try:
            found[part] = call()
        except Exception as exc:
            found[part], errors[part] = None, f"{type(exc).__name__}: {exc}"
    return {**found, "errors": errors}


def query(timeout: float = QUERY_TIMEOUT_S) -> dict[str, Any]:
    """`facts()` from a child process; when the child dies, each part's error says how."""
    command = [sys.executable, "-m", "localserve.native.build_info"]
    try:
        done = subprocess.run(
            command, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL
        )
    except subprocess.TimeoutExpired:
        return failed(f"the llama.cpp query gave no answer within {timeout:.0f} s")
    except OSError as exc:
        return failed(f"the llama.cpp query could not start: {exc}")
    if done.returncode < 0:
        return failed(f"loading llama.cpp died of {_signal_name(-done.returncode)}")
    try:
        answer = json.loads(done.stdout.strip().splitlines()[-1])
        if isinstance(answer, dict) and isinstance(answer.get("errors"), dict):
            return answer
    except (IndexError, ValueError):
        pass
    last = (done.stderr.strip().splitlines() or ["no output"])[-1]
    return failed(f"the llama.cpp query exited with {done.returncode}: {last}")


def failed(reason: str) -> dict[str, Any]:
    """What query() answers when the child gave no answer: every library part failed."""
    found: dict[str, Any] = dict.fromkeys(PARTS)
    errors = dict.fromkeys(PARTS[1:], reason)
    # The version is metadata: it is known even when the library cannot load.
    try:
        found["version"] = version()
    except Exception as exc:
        errors["version"] = f"{type(exc).__name__}: {exc}"
    return {**found, "errors": errors}


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


if __name__ == "__main__":
    # The child of query(): llama.cpp logs on stderr as it loads; the answer is stdout's last line.
    print(json.dumps(facts()))
