"""The machine a benchmark ran on, as every record in docs/benchmarks.md names it."""

from __future__ import annotations

import contextlib
import os
import platform
import re
from pathlib import Path

UNITS = (("AVX2", "avx2"), ("AVX-512", "avx512f"), ("AMX", "amx_tile"))
# A record's CPU kind, by the best of those units it has, as the records' markers and
# headings name it: each kind keeps its own record against llama.cpp's server.
KINDS = {"amx_tile": "amx", "avx512f": "avx512", "avx2": "avx2"}
KIND_NAMES = {
    "amx": "an AMX host",
    "avx512": "an AVX-512 host",
    "avx2": "an AVX2-only host",
    "other": "a host without AVX2",
}


def _cpu() -> tuple[str, set[str]]:
    cpu, flags = platform.processor() or "unknown CPU", set()
    with contextlib.suppress(OSError):
        info = Path("/proc/cpuinfo").read_text()
        m = re.search(r"^model name\s*:\s*(.+)$", info, re.M)
        if m:
            cpu = m.group(1).strip()
        f = re.search(r"^flags\s*:\s*(.+)$", info, re.M)
        flags = set(f.group(1).split()) if f else set()
    return cpu, flags


def machine() -> str:
    """The cores, the CPU's model and the vector units llama.cpp's kernels pick from: the
    machine kinds this project runs on differ in exactly these (AVX2 EPYC, AMX Xeon)."""
    cpu, flags = _cpu()
    units = ", ".join(f"{name} {'yes' if flag in flags else 'no'}" for name, flag in UNITS)
    return f"{len(os.sched_getaffinity(0))} CPUs (nproc), {cpu} ({units})"


def cpu_kind() -> str:
    """amx, avx512, avx2 or other: the best of UNITS this CPU has."""
    flags = _cpu()[1]
    return next((kind for flag, kind in KINDS.items() if flag in flags), "other")
