"""llama.cpp in this process: its one-time set-up, its log captured per loading thread, the
buffers a load says it allocated, the cores it may use, and the device list a model loads onto.
"""

from __future__ import annotations

import ctypes
import logging
import os
import re
import sys
import threading

import llama_cpp as ll

from localserve.ground.errors import LoadFailed

log = logging.getLogger(__name__)

_backend_ready = False
_backend_lock = threading.Lock()
# llama.cpp logs from the thread that called it, so a load can collect its own lines.
capture = threading.local()
_BUFFER_LINE = re.compile(r"(\S+)\s+(\S+) buffer size =\s+([\d.]+) MiB")
_GGML_WARN, _GGML_ERROR = 3, 4  # ggml_log_level: NONE, DEBUG, INFO, WARN, ERROR, CONT


@ll.llama_log_callback
def _on_llama_log(level: int, text: bytes, user_data: ctypes.c_void_p) -> None:
    lines = getattr(capture, "lines", None)
    message = text.decode("utf-8", errors="replace")
    if lines is not None:
        lines.append(message)
    if level in (_GGML_WARN, _GGML_ERROR) and message.strip():
        log.log(
            logging.WARNING if level == _GGML_WARN else logging.ERROR,
            "llama.cpp: %s",
            message.rstrip(),
        )


def ensure_backend() -> None:
    global _backend_ready
    with _backend_lock:
        if not _backend_ready:
            # Replaces llama-cpp-python's callback, which prints every line to stderr.
            ll.llama_log_set(_on_llama_log, ctypes.c_void_p(0))
            ll.llama_backend_init()
            _backend_ready = True


def reported_buffers(lines: list[str]) -> dict[str, int]:
    """The buffers llama.cpp says it allocated, in bytes, by buffer type and kind:
    "cpu_mapped model", "vulkan0 kv", "vulkan_host compute", ..."""
    sizes: dict[str, int] = {}
    for line in lines:
        m = _BUFFER_LINE.search(line)
        if m:
            name = f"{m.group(1).lower()} {m.group(2).lower()}"
            sizes[name] = sizes.get(name, 0) + int(float(m.group(3)) * (1 << 20))
    return sizes


def usable_cores() -> int:
    """Cores this process may run on: affinity and cpusets, not the machine's total."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # macOS and Windows have no affinity call
        return max(1, os.cpu_count() or 1)


def device_list(device: str | None) -> ctypes.Array[ctypes.c_void_p]:
    """The NULL-terminated device list for llama_model_params.devices: the one named, or none
    (a CPU-only model), never ggml's default of every GPU."""
    if device is None:
        return (ctypes.c_void_p * 1)(None)
    # The libggml libllama loaded (by soname; native/build_info.py says why), not
    # llama_cpp._ggml's, which is another copy when LLAMA_CPP_LIB_PATH is set.
    from llama_cpp import _ggml

    lib = ctypes.CDLL("libggml.so.0") if sys.platform.startswith("linux") else _ggml.libggml
    by_name = lib["ggml_backend_dev_by_name"]
    by_name.argtypes, by_name.restype = [ctypes.c_char_p], ctypes.c_void_p
    found = by_name(device.encode())
    if not found:
        raise LoadFailed(
            f"llama.cpp has no device '{device}' (is GGML_VK_VISIBLE_DEVICES or "
            "CUDA_VISIBLE_DEVICES hiding it?)"
        )
    return (ctypes.c_void_p * 2)(found, None)
