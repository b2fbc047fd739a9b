"""What a bench_swap.py run measures, and how it is written up: its settings, the records of
both parts (mixed traffic; cold loads and memory) and their tables in docs/benchmarks.md."""

from __future__ import annotations

import argparse
import platform
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks._common import (
    BASE_SUFFIX,
    Results,
    Sample,
    dated,
    div,
    machine,
    percentile,
    versions,
)

START, END = "<!-- bench_swap:start -->", "<!-- bench_swap:end -->"
MiB = 1 << 20
SLOTS, CTX_PER_SLOT, STEP_TOKENS = 8, 1024, 512  # --parallel 8 --ctx 1024, default --step-tokens
# "llama-cpp-python" gets localserve's thread count; "-default" runs as shipped
# (cpu_count // 2 threads per model), the baseline the model-manager issue names.
OURS = ("localserve-both", "localserve-one")
# The same two, imported from another checkout (--baseline-tree): old and new code in one run.
OURS_BASE = tuple(name + BASE_SUFFIX for name in OURS)
SERVERS = (*OURS, *OURS_BASE, "llama-cpp-python", "llama-cpp-python-default")
BASELINES = SERVERS[len(OURS) :]


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


@dataclass
class Mixed(Results):
    server: str
    budget: int | None
    wall_s: float
    samples: list[Sample] = field(default_factory=list)
    loads: int | None = None

    def latency(self, q: float) -> float:
        return percentile([s.latency_s for s in self.ok], q)


@dataclass
class ColdLoad:
    model: Model
    raw: list[dict[str, Any]] = field(default_factory=list)  # _swap_loads.RAW_LOAD's, per rep
    http_s: list[float] = field(default_factory=list)  # POST /api/admin/load, wall
    load_seconds: list[float] = field(default_factory=list)  # /api/ps localserve.load_seconds
    ps: dict[str, Any] | None = None  # /api/ps "localserve" of the last load

    def raw_s(self) -> float:
        return percentile([r["total_s"] for r in self.raw], 0.5)


def mib(n: float | None) -> str:
    return "n/a" if n is None else f"{n / MiB:.1f}"


# --- part 1: mixed traffic -----------------------------------------------------------


MIXED_HEADER = (
    "| server | memory budget (MiB) | requests | agg tok/s | latency p50 (s) "
    "| latency p95 (s) | TTFT p50 (s) | avg tokens | errors | model loads |\n"
    "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
)


def mixed_row(m: Mixed) -> str:
    n = len(m.samples)
    avg = m.tokens / len(m.ok) if m.ok else 0.0
    budget = mib(m.budget) if m.budget is not None else "n/a (one model at a time)"
    loads = "n/a" if m.loads is None else str(m.loads)
    return (
        f"| {m.server} | {budget} | {n} | {m.tok_s:.1f} | {m.latency(0.5):.2f} "
        f"| {m.latency(0.95):.2f} | {m.ttft(0.5):.2f} | {avg:.1f} | {n - len(m.ok)} "
        f"| {loads} |"
    )


def mixed_ratios(results: list[Mixed], baseline: str) -> str:
    by = {m.server: m for m in results}
    base = by.get(baseline)
    if base is None:
        return ""
    lines = [
        f"| localserve / {baseline} | tok/s ratio (higher is better) "
        "| latency p50 ratio (lower is better) | latency p95 ratio |",
        "|---|---:|---:|---:|",
    ]
    # Each of ours against the baseline; against its own baseline-tree twin, only that one.
    twins = [n for n in OURS if n + BASE_SUFFIX == baseline]
    for name in twins or ([*OURS, *OURS_BASE] if baseline not in OURS_BASE else []):
        ours = by.get(name)
        if ours is not None:
            lines.append(
                f"| {name} | {div(ours.tok_s, base.tok_s)} "
                f"| {div(ours.latency(0.5), base.latency(0.5))} "
                f"| {div(ours.latency(0.95), base.latency(0.95))} |"
            )
    return "\n".join(lines) if len(lines) > 2 else ""


# --- part 2 and 3: cold loads and memory ---------------------------------------------


LOAD_HEADER = (
    "| model | raw llama.cpp (s) | localserve POST /api/admin/load (s) "
    "| localserve load_seconds (s) | POST / raw | load_seconds / raw | target |\n"
    "|---|---:|---:|---:|---:|---:|---|"
)


def load_row(r: ColdLoad) -> str:
    raw = r.raw_s()
    http = percentile(r.http_s, 0.5)
    ls = percentile(r.load_seconds, 0.5)
    verdict = "met" if raw > 0 and http / raw <= 1.2 else "missed"
    return (
        f"| {r.model.name} | {raw:.3f} | {http:.3f} | {ls:.3f} | {div(http, raw)} "
        f"| {div(ls, raw)} | <= 1.2x: {verdict} |"
    )


MEM_HEADER = (
    "| model | estimate (MiB) | llama.cpp buffers (MiB) | error | RSS delta (MiB) "
    "| estimate vs RSS delta | target |\n"
    "|---|---:|---:|---:|---:|---:|---|"
)


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
    return (
        f"| {r.model.name} | {mib(est)} | {mib(actual)} | "
        f"{pct(est, actual) if est is not None else 'n/a'} | {mib(rss)} | "
        f"{pct(est, rss) if est is not None else 'n/a'} | within ±15 %: {verdict} |"
    )


BREAKDOWN_HEADER = (
    "| model | part | estimate (MiB) | llama.cpp, raw load (MiB) | error |\n"
    "|---|---|---:|---:|---:|"
)


def breakdown_rows(r: ColdLoad) -> list[str]:
    """The estimate's terms against the buffers llama.cpp names when loading the model alone."""
    est = (r.ps or {}).get("memory_estimate") or r.model.estimate
    buf = r.raw[-1]["buffers"] if r.raw else {}
    parts = [
        ("weights", est["weights"], buf.get("model")),
        ("KV cache", est["kv_cache"], buf.get("kv")),
        (
            "compute + output",
            est["compute"],
            (buf.get("compute", 0) + buf.get("output", 0)) or None,
        ),
    ]
    rows = [
        f"| {r.model.name} | {part} | {mib(e)} | {mib(a)} | {pct(e, a)} |" for part, e, a in parts
    ]
    other = {k: v for k, v in buf.items() if k not in ("model", "kv", "compute", "output")}
    if other:
        rows.append(
            f"| {r.model.name} | other buffers ({', '.join(sorted(other))}) | 0.0 "
            f"| {mib(sum(other.values()))} | n/a |"
        )
    return rows


# --- the section ---------------------------------------------------------------------


def section(
    argv: list[str],
    models_: list[Model],
    args: argparse.Namespace,
    budgets: dict[str, int],
    mixed: list[Mixed],
    loads: list[ColdLoad],
) -> str:
    parts = [
        START,
        "## Model swapping (`bench_swap.py`)",
        "",
        *dated(),
        f"- Machine: {machine()}",
        f"- Versions: {versions()}, Python {platform.python_version()}",
        "- Models: "
        + ", ".join(
            f"`{m.name}` (`{Path(m.path).name}`, estimate {mib(m.total)} MiB)" for m in models_
        ),
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
            "`llama-cpp-python-default` runs as shipped. The Gemma GGUF carries no chat template: "
            "localserve falls back to "
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
