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

PARTS = ("version", "system_info", "gpu_offload", "backends", "devices")

# ggml-backend.h's enum ggml_backend_dev_type, in order.
_DEVICE_KINDS = ("cpu", "gpu", "igpu", "accel", "meta")


@dataclass(frozen=True)
class Device:
    name: str
    description: str
    kind: str
    memory_total: int | None = None
    memory_free: int | None = None
    # The largest tensor it takes, where it has a limit (a Vulkan device's
    # maxStorageBufferRange: 128 MiB on lavapipe); None: none below MAX_TENSOR_PROBE.
    max_tensor: int | None = None


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


def libggml() -> ctypes.CDLL:
    """The libggml that libllama loaded, whose devices run the models. By soname on Linux: the
    loader hands back the copy already loaded (from LLAMA_CPP_LIB_PATH too), where
    llama_cpp._ggml opens its own folder's file, a second copy when the override is set."""
    import llama_cpp  # noqa: F401  (loads libllama, and libggml with it)
    from llama_cpp import _ggml

    return ctypes.CDLL("libggml.so.0") if sys.platform.startswith("linux") else _ggml.libggml


def backends() -> list[str]:
    """ggml's backends this build has ("CPU", "Vulkan", "CUDA"): what it can run on at all."""
    lib = libggml()
    count, get, name = (
        lib["ggml_backend_reg_count"],
        lib["ggml_backend_reg_get"],
        lib["ggml_backend_reg_name"],
    )
    count.argtypes, count.restype = [], ctypes.c_size_t
    get.argtypes, get.restype = [ctypes.c_size_t], ctypes.c_void_p
    name.argtypes, name.restype = [ctypes.c_void_p], ctypes.c_char_p
    return [(name(get(i)) or b"").decode(errors="replace") for i in range(count())]


# Tensors up to this size are asked about; a device that takes them all has no limit for us.
MAX_TENSOR_PROBE = 1 << 40
_GGML_TYPE_F32 = 0
_ROW = 1024  # elements per row of the probe's matrix


class _InitParams(ctypes.Structure):
    _fields_ = [
        ("mem_size", ctypes.c_size_t),
        ("mem_buffer", ctypes.c_void_p),
        ("no_alloc", ctypes.c_bool),
    ]


def max_tensor(lib: ctypes.CDLL, device: int) -> int | None:
    """The largest matrix `device` multiplies, by asking ggml_backend_dev_supports_op about
    ever larger ones (no memory is allocated: the tensors are descriptions). llama.cpp asks
    the same of every weight it would offload, and keeps on the host those a device refuses."""
    base = ctypes.CDLL("libggml-base.so.0") if sys.platform.startswith("linux") else lib
    init, free = base["ggml_init"], base["ggml_free"]
    init.argtypes, init.restype = [_InitParams], ctypes.c_void_p
    free.argtypes, free.restype = [ctypes.c_void_p], None
    new_2d, mul_mat = base["ggml_new_tensor_2d"], base["ggml_mul_mat"]
    new_2d.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_int64, ctypes.c_int64]
    new_2d.restype = ctypes.c_void_p
    mul_mat.argtypes, mul_mat.restype = [ctypes.c_void_p] * 3, ctypes.c_void_p
    supports = lib["ggml_backend_dev_supports_op"]
    supports.argtypes, supports.restype = [ctypes.c_void_p, ctypes.c_void_p], ctypes.c_bool

    def takes(rows: int) -> bool:
        ctx = init(_InitParams(1 << 20, None, True))
        try:
            weight = new_2d(ctx, _GGML_TYPE_F32, _ROW, rows)
            vector = new_2d(ctx, _GGML_TYPE_F32, _ROW, 1)
            return bool(supports(device, mul_mat(ctx, weight, vector)))
        finally:
            free(ctx)

    row_bytes = _ROW * 4
    low, high = 1, MAX_TENSOR_PROBE // row_bytes
    if takes(high):
        return None
    if not takes(low):
        return 0
    while low + 1 < high:  # takes(low) and not takes(high)
        mid = (low + high) // 2
        low, high = (mid, high) if takes(mid) else (low, mid)
    return low * row_bytes


def devices() -> list[Device]:
    """ggml's backend devices. llama-cpp-python 0.3.36 binds none of ggml's device functions, so
    they are looked up in the libggml it loads; AttributeError when a build lacks them."""
    lib = libggml()
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
        device_kind = _DEVICE_KINDS[k] if 0 <= k < len(_DEVICE_KINDS) else str(k)
        found.append(
            Device(
                name=(name(device) or b"").decode(errors="replace"),
                description=(description(device) or b"").decode(errors="replace"),
                kind=device_kind,
                memory_total=total.value or None,
                memory_free=free.value or None,
                max_tensor=max_tensor(lib, device) if device_kind != "cpu" else None,
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
        "backends": backends,
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
    command = [sys.executable, "-m", "localserve_native.build_info"]
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
