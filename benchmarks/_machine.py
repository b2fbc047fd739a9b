"""The machine a benchmark ran on, as every record in docs/benchmarks.md names it."""

from __future__ import annotations

import contextlib
import os
import platform
import re
from pathlib import Path


def machine() -> str:
    """The cores, the CPU's model and the vector units llama.cpp's kernels pick from: the
    machine kinds this project runs on differ in exactly these (AVX2 EPYC, AMX Xeon)."""
    cpu, flags = platform.processor() or "unknown CPU", set()
    with contextlib.suppress(OSError):
        info = Path("/proc/cpuinfo").read_text()
        m = re.search(r"^model name\s*:\s*(.+)$", info, re.M)
        if m:
            cpu = m.group(1).strip()
        f = re.search(r"^flags\s*:\s*(.+)$", info, re.M)
        flags = set(f.group(1).split()) if f else set()
    units = ", ".join(
        f"{name} {'yes' if flag in flags else 'no'}"
        for name, flag in (("AVX2", "avx2"), ("AVX-512", "avx512f"), ("AMX", "amx_tile"))
    )
    return f"{len(os.sched_getaffinity(0))} CPUs (nproc), {cpu} ({units})"
