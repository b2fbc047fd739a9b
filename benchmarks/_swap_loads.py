"""Parts 2 and 3 of bench_swap.py: cold loads, raw llama.cpp in a fresh process against POST
/api/admin/load on a running daemon, and the memory /api/ps reports after each."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks._common import REPO, free_port
from benchmarks._swap_report import CTX_PER_SLOT, SLOTS, STEP_TOKENS, ColdLoad, MiB, Model
from benchmarks._swap_servers import localserve_cmd, post_ok, server, server_env
from tests.support import in_process
from tests.support.daemons import TimedOut, poll, reserved, resident

# Mirrors LlamaCppBackend._load in localserve/backends/llama_cpp.py: default model params on
# the CPU, with the extra buffer types the daemon's probe allows here, one context of slots x
# ctx cells with a sequence per slot and per-slot KV streams.
# The log callback collects lines as localserve's does (and keeps them off the terminal).
RAW_LOAD = r"""
import ctypes, json, re, sys, time
import llama_cpp as ll
path = sys.argv[1]
slots, ctx_slot, step, threads, extra_bufts = map(int, sys.argv[2:7])
lines = []
@ll.llama_log_callback
def on_log(level, text, user_data):
    lines.append(text.decode("utf-8", errors="replace"))
ll.llama_log_set(on_log, ctypes.c_void_p(0))
ll.llama_backend_init()
mparams = ll.llama_model_default_params()
mparams.n_gpu_layers = 0
mparams.use_extra_bufts = bool(extra_bufts)
cparams = ll.llama_context_default_params()
n_batch = max(step, slots)
cparams.n_ctx = ctx_slot * slots
cparams.n_seq_max = slots
cparams.n_batch = n_batch
cparams.n_ubatch = n_batch
cparams.n_threads = threads
cparams.n_threads_batch = threads
cparams.kv_unified = False
cparams.no_perf = True
t0 = time.perf_counter()
model = ll.llama_model_load_from_file(path.encode(), mparams)
t1 = time.perf_counter()
assert model, "llama_model_load_from_file failed"
ctx = ll.llama_init_from_model(model, cparams)
t2 = time.perf_counter()
assert ctx, "llama_init_from_model failed"
buffers = {}
for line in lines:
    m = re.search(r"(\S+) buffer size =\s+([\d.]+) MiB", line)
    if m:
        kind = m.group(1).lower()
        buffers[kind] = buffers.get(kind, 0) + int(float(m.group(2)) * (1 << 20))
print(json.dumps({"model_s": t1 - t0, "context_s": t2 - t1, "total_s": t2 - t0,
                  "buffers": buffers}))
ll.llama_free(ctx)
ll.llama_model_free(model)
"""


def raw_load(m: Model, threads: int) -> dict[str, Any]:
    cmd = [
        sys.executable,
        "-c",
        RAW_LOAD,
        m.path,
        str(SLOTS),
        str(CTX_PER_SLOT),
        str(STEP_TOKENS),
        str(threads),
        str(int(in_process.extra_bufts())),
    ]
    proc = subprocess.run(cmd, capture_output=True, timeout=300, cwd=REPO, env=server_env())
    if proc.returncode != 0:
        raise RuntimeError(
            f"raw load of {m.name} failed ({proc.returncode}):\n"
            f"{proc.stderr.decode(errors='replace')[-2000:]}"
        )
    return json.loads(proc.stdout.decode().strip().splitlines()[-1])


def unload_and_wait(base: str, name: str, timeout_s: float = 60.0) -> None:
    """Unload, then wait until /api/ps no longer lists the model *and* its memory is back in
    the pool: /api/ps drops it at once, while the free itself runs on a worker thread."""
    if name not in resident(base):
        return
    post_ok(base + "/api/admin/unload", {"model": name})
    try:
        poll(
            f"{name} unloading",
            lambda: name not in resident(base) and name not in reserved(base),
            timeout_s,
            interval_s=0.05,
        )
    except TimedOut:
        raise RuntimeError(
            f"{name} still loaded {timeout_s:.0f}s after POST /api/admin/unload"
        ) from None


def run_cold_loads(models_: list[Model], args: argparse.Namespace, logdir: Path) -> list[ColdLoad]:
    results = [ColdLoad(m) for m in models_]
    for r in results:
        # The file in the page cache first: every load below, raw or not, reads it from RAM.
        with open(r.model.path, "rb") as f:
            while f.read(1 << 24):
                pass
    # Raw llama.cpp first, with no server running: a fresh process per repetition.
    for r in results:
        for _ in range(args.load_reps):
            r.raw.append(raw_load(r.model, args.threads))
        times = ", ".join(f"{x['total_s']:.3f}" for x in r.raw)
        print(f"  raw llama.cpp {r.model.name}: {times} s", flush=True)
    # Then one daemon, with only smollm2 loaded at start and room for both.
    port = free_port()
    budget = sum(m.total for m in models_) + 1024 * MiB
    cmd = localserve_cmd(port, models_[:1], budget, args.threads, ("--keep-alive", "-1"))
    with server(cmd, "/health", port, logdir / "cold-load-localserve.log") as base:
        for r in results:
            name = r.model.name
            for _ in range(args.load_reps):
                unload_and_wait(base, name)
                t0 = time.perf_counter()
                post_ok(base + "/api/admin/load", {"model": r.model.ref})
                r.http_s.append(time.perf_counter() - t0)
                entry = resident(base).get(name)
                if entry is None:
                    raise RuntimeError(f"{name} is not in /api/ps right after loading it")
                r.ps = entry["localserve"]
                r.load_seconds.append(float(r.ps["load_seconds"]))
            print(
                f"  localserve {name}: POST /api/admin/load "
                f"{', '.join(f'{x:.3f}' for x in r.http_s)} s; load_seconds "
                f"{', '.join(f'{x:.3f}' for x in r.load_seconds)} s",
                flush=True,
            )
            # Unload before the next model so each model's figures are its own.
            unload_and_wait(base, name)
    return results
