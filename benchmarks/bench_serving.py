"""Serving benchmark: localserve against llama-cpp-python's own server, on the same GGUF.

Each server runs alone (never both at once, so they do not fight over cores), gets one
warm-up request, then for every concurrency level C, C workers send streamed chat
completions back to back. Per level we report aggregate completion tokens/s and TTFT
p50/p95, print a table as we go and (unless --no-write) update docs/benchmarks.md.

    python -m benchmarks.bench_serving                      # full run, writes the doc
    python -m benchmarks.bench_serving --concurrency 1,2 --max-tokens 16 --rounds 1 --no-write
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime as dt
import os
import platform
import shlex
import signal
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp
from benchmarks._common import (BASE_SUFFIX, PROMPTS, REPO, Results, Sample, cli, client_session, div,
                     free_port, machine, running, serve_command, stream_chat, tree_env, versions,
                     write_doc)

START, END = "<!-- bench_serving:start -->", "<!-- bench_serving:end -->"
# --cold gets a section of its own.
COLD_START, COLD_END = "<!-- bench_serving_cold:start -->", "<!-- bench_serving_cold:end -->"
# "llama-cpp-python" gets localserve's thread count; "-default" runs it exactly as shipped
# (cpu_count // 2 threads), which is the baseline the engine issue names.
BASE = "localserve" + BASE_SUFFIX
SERVERS = ("localserve", BASE, "llama-cpp-python", "llama-cpp-python-default", "llama-server")
BASELINES = SERVERS[1:]
# localserve with /metrics off: --metrics-overhead runs it beside localserve (issue #18).
NO_METRICS = "localserve-no-metrics"
METRICS_START, METRICS_END = "<!-- bench_serving_metrics:start -->", "<!-- bench_serving_metrics:end -->"
# llama.cpp's C++ server is not on PyPI: build it from the llama.cpp sources vendored in
# llama-cpp-python's sdist (same kernels) and name the binary with --llama-server.
LLAMA_SERVER_BIN = os.environ.get("LLAMA_SERVER", "")
# The checkout that localserve@base runs from (--baseline-tree).
BASELINE_TREE = ""

@dataclass
class Level(Results):
    server: str
    concurrency: int
    wall_s: float
    samples: list[Sample] = field(default_factory=list)


# --- servers -------------------------------------------------------------------------


def server_command(name: str, model_path: str, port: int, threads: int) -> tuple[list[str], str]:
    """The argv that starts a server, and the path that answers 200 once it can serve."""
    if name in ("localserve", BASE, NO_METRICS):
        args = ["--model", "smollm2", "--parallel", "16", "--ctx", "2048",
                "--threads", str(threads), *(["--no-metrics"] if name == NO_METRICS else [])]
        return serve_command(args, port), "/health"
    if name == "llama-server":
        cmd = [LLAMA_SERVER_BIN, "-m", model_path, "--host", "127.0.0.1", "--port", str(port),
               "-np", "16", "-c", str(16 * 2048), "-t", str(threads), "-tb", str(threads)]
        return cmd, "/health"
    cmd = [sys.executable, "-m", "llama_cpp.server", "--model", model_path, "--host", "127.0.0.1",
           "--port", str(port), "--n_ctx", "2048", "--interrupt_requests", "False"]
    if name == "llama-cpp-python":
        # llama_cpp.server defaults to cpu_count // 2 decode threads while localserve uses all
        # cores; pinning both to the same count keeps the comparison about serving.
        cmd += ["--n_threads", str(threads), "--n_threads_batch", str(threads)]
    return cmd, "/v1/models"


@contextlib.contextmanager
def running_server(name: str, model_path: str, threads: int, logdir: Path) -> Iterator[str]:
    port = free_port()
    cmd, ready_path = server_command(name, model_path, port, threads)
    env = tree_env(BASELINE_TREE) if name == BASE else None
    with running(cmd, port, ready_path, logdir / f"{name}.log", env=env) as base:
        yield base


# --- client --------------------------------------------------------------------------


async def model_id(session: aiohttp.ClientSession, base: str) -> str:
    async with session.get(base + "/v1/models") as r:
        r.raise_for_status()
        return (await r.json())["data"][0]["id"]


def prompt_for(i: int, concurrency: int, cold: bool) -> str:
    """Request i's prompt. Cold prompts open with a tag no other request has, so no server can
    reuse more of one than the chat template's opening; the tags are the same for every server."""
    prompt = PROMPTS[i % len(PROMPTS)]
    return f"[request {concurrency}-{i}] {prompt}" if cold else prompt


async def run_level(
    session: aiohttp.ClientSession, server: str, base: str, model: str,
    concurrency: int, rounds: int, max_tokens: int, cold: bool = False,
) -> Level:
    # At least 8 requests per round, so low concurrency still yields a usable p95.
    total = max(concurrency, 8) * rounds
    queue: asyncio.Queue[int] = asyncio.Queue()
    for i in range(total):
        queue.put_nowait(i)
    samples: list[Sample] = []

    async def worker() -> None:
        while True:
            try:
                i = queue.get_nowait()
            except asyncio.QueueEmpty:
                return
            # Request i always gets the same prompt, so every server sees the same workload.
            samples.append(await stream_chat(session, base, model,
                                             prompt_for(i, concurrency, cold), max_tokens))

    t0 = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return Level(server, concurrency, time.perf_counter() - t0, samples)


async def bench_server(
    server: str, base: str, levels: list[int], rounds: int, max_tokens: int, cold: bool
) -> list[Level]:
    async with client_session() as session:
        model = await model_id(session, base)
        warm = await stream_chat(session, base, model, PROMPTS[0], min(16, max_tokens))
        if warm.error:
            raise RuntimeError(f"{server} warm-up failed: {warm.error}")
        results = []
        for c in levels:
            level = await run_level(session, server, base, model, c, rounds, max_tokens, cold)
            print(row(level), flush=True)
            for error in sorted({s.error for s in level.samples if s.error}):
                print(f"  {server} error: {error}", flush=True)
            results.append(level)
        return results


# --- reporting -----------------------------------------------------------------------

HEADER = ("| server | concurrency | agg tok/s | TTFT p50 (ms) | TTFT p95 (ms) | requests "
          "| avg tokens | errors |\n|---|---:|---:|---:|---:|---:|---:|---:|")


def row(lv: Level) -> str:
    n = len(lv.samples)
    avg = lv.tokens / len(lv.ok) if lv.ok else 0.0
    return (f"| {lv.server} | {lv.concurrency} | {lv.tok_s:.1f} | {lv.ttft(0.5) * 1e3:.0f} "
            f"| {lv.ttft(0.95) * 1e3:.0f} | {n} | {avg:.1f} | {n - len(lv.ok)} |")


def ratio_table(levels: list[Level], baseline: str, ours_name: str = "localserve") -> str:
    by = {(lv.server, lv.concurrency): lv for lv in levels}
    lines = ["| concurrency | tok/s ratio (higher is better) | TTFT p50 ratio (lower is better) "
             "| TTFT p95 ratio |", "|---:|---:|---:|---:|"]
    for c in sorted({lv.concurrency for lv in levels}):
        ours, base = by.get((ours_name, c)), by.get((baseline, c))
        if ours is None or base is None:
            continue
        lines.append(f"| {c} | {div(ours.tok_s, base.tok_s)} | "
                     f"{div(ours.ttft(0.5), base.ttft(0.5))} | "
                     f"{div(ours.ttft(0.95), base.ttft(0.95))} |")
    return "\n".join(lines) if len(lines) > 2 else ""


def ratio_pairs() -> list[tuple[str, str]]:
    """localserve against every baseline; the baseline tree's localserve against the C++
    server too, so both ratios to llama-server come from one run."""
    return [("localserve", b) for b in BASELINES] + [(BASE, "llama-server")]


def section(levels: list[Level], argv: list[str], model_path: str, cold: bool,
            markers: tuple[str, str] = (START, END), title: str = "") -> str:
    parts = [
        markers[0],
        title or ("## Serving with cold prompts (`bench_serving.py --cold`)" if cold
                  else "## Serving throughput and latency (`bench_serving.py`)"),
        "",
        f"- Date: {dt.datetime.now(dt.timezone.utc):%Y-%m-%d %H:%M UTC}",
        f"- Machine: {machine()}",
        f"- Versions: {versions()}, Python {platform.python_version()}",
        f"- Model: `{Path(model_path).name}`",
        f"- Command: `{shlex.join(argv)}`",
        *([f"- llama.cpp's server: `{LLAMA_SERVER_BIN}`"]
          if any(lv.server == "llama-server" for lv in levels) else []),
        *([f"- {BASE}: localserve imported from `{BASELINE_TREE}`"]
          if any(lv.server == BASE for lv in levels) else []),
        "",
        "Streamed chat completions, greedy. *agg tok/s* is all completion tokens of a level "
        "over its wall time; TTFT is send to first content chunk; *avg tokens* shows how "
        "close answers came to `--max-tokens` (early EOS makes them shorter).",
        "",
        HEADER,
        *(row(lv) for lv in levels),
    ]
    for ours, baseline in ratio_pairs():
        ratios = ratio_table(levels, baseline, ours)
        if ratios:
            parts += ["", f"{ours} / {baseline}:", "", ratios]
    return "\n".join(parts + [markers[1]])


# --- main ----------------------------------------------------------------------------


def csv_ints(s: str) -> list[int]:
    return [int(x) for x in s.split(",") if x.strip()]


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--servers", default=",".join(SERVERS),
                   help=f"comma-separated, from: {', '.join(SERVERS)}")
    p.add_argument("--concurrency", type=csv_ints, default=[1, 4, 8, 16])
    p.add_argument("--max-tokens", type=int, default=128)
    p.add_argument("--rounds", type=int, default=2,
                   help="requests per level = max(concurrency, 8) * rounds")
    p.add_argument("--threads", type=int, default=len(os.sched_getaffinity(0)),
                   help="CPU threads given to each server (default: all usable cores)")
    p.add_argument("--cold", action="store_true",
                   help="give every request a prompt no server has seen (no cached prefix beyond "
                   "the chat template's opening)")
    p.add_argument("--no-write", action="store_true", help="do not update docs/benchmarks.md")
    p.add_argument("--metrics-overhead", type=int, default=0, metavar="N",
                   help=f"instead: {NO_METRICS} then localserve, N pairs; the median of the "
                   "pairs' tok/s ratios (a section of its own)")
    p.add_argument("--llama-server", default=LLAMA_SERVER_BIN, metavar="BIN",
                   help="llama.cpp's llama-server binary (env LLAMA_SERVER); without it that "
                   "server is skipped")
    p.add_argument("--baseline-tree", default="", metavar="DIR",
                   help=f"also run {BASE}: localserve imported from the checkout DIR (the code "
                   "before a change), so old and new code are measured in one run")
    args = p.parse_args(argv)
    args.servers = [s.strip() for s in args.servers.split(",") if s.strip()]
    if not args.llama_server and "llama-server" in args.servers:
        args.servers.remove("llama-server")
    if not args.baseline_tree and BASE in args.servers:
        args.servers.remove(BASE)
    if args.metrics_overhead:
        args.servers = [NO_METRICS, "localserve"] * args.metrics_overhead
    unknown = set(args.servers) - {*SERVERS, NO_METRICS}
    if unknown:
        p.error(f"unknown server(s): {', '.join(sorted(unknown))}")
    return args


def main(argv: list[str]) -> int:
    global LLAMA_SERVER_BIN, BASELINE_TREE
    args = parse_args(argv)
    LLAMA_SERVER_BIN, BASELINE_TREE = args.llama_server, args.baseline_tree
    from localserve.store.resolve import resolve

    model_path = resolve("smollm2").path
    # SIGTERM becomes SystemExit, so the `finally` that stops the server still runs.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    print(f"model: {model_path}\n{machine()}\n\n{HEADER}", flush=True)
    levels: list[Level] = []
    with tempfile.TemporaryDirectory(prefix="bench_serving_") as logdir:
        for server in args.servers:
            with running_server(server, model_path, args.threads, Path(logdir)) as base:
                levels += asyncio.run(bench_server(server, base, args.concurrency,
                                                   args.rounds, args.max_tokens, args.cold))
    if args.metrics_overhead:
        return report_overhead(levels, args, argv, model_path)
    for ours, baseline in ratio_pairs():
        ratios = ratio_table(levels, baseline, ours)
        if ratios:
            print(f"\n{ours} / {baseline}:\n{ratios}")
    if not args.no_write:
        cmd = ["python", str(Path(__file__).resolve().relative_to(REPO)), *argv]
        markers = (COLD_START, COLD_END) if args.cold else (START, END)
        write_doc(section(levels, cmd, model_path, args.cold, markers), *markers)
    return 0


def overhead_ratios(levels: list[Level]) -> dict[int, list[float]]:
    """Per concurrency, each metrics-on run's tok/s over the metrics-off run just before it:
    pairs cancel the machine's drift, which medians of each side alone do not."""
    ratios: dict[int, list[float]] = {}
    for c in sorted({lv.concurrency for lv in levels}):
        off = [lv for lv in levels if lv.server == NO_METRICS and lv.concurrency == c]
        on = [lv for lv in levels if lv.server == "localserve" and lv.concurrency == c]
        ratios[c] = [a.tok_s / b.tok_s for a, b in zip(on, off) if b.tok_s]
    return ratios


def report_overhead(levels: list[Level], args: argparse.Namespace, argv: list[str],
                    model_path: str) -> int:
    lines = ["| concurrency | on / off, each pair | median | target >= 0.98x |", "|---:|---|---:|---|"]
    for c, ratios in overhead_ratios(levels).items():
        median = statistics.median(ratios)
        lines.append(f"| {c} | {', '.join(f'{r:.2f}' for r in ratios)} | {median:.2f}x | "
                     f"{'met' if median >= 0.98 else 'missed'} |")
    table = "\n".join(lines)
    print(f"\nlocalserve (/metrics on) / {NO_METRICS}, pairwise:\n{table}")
    if not args.no_write:
        cmd = ["python", str(Path(__file__).resolve().relative_to(REPO)), *argv]
        title = ("## Metrics overhead (`bench_serving.py --metrics-overhead`): the serving "
                 "benchmark with /metrics on and off, alternately")
        text = section(levels, cmd, model_path, False, (METRICS_START, METRICS_END), title)
        text = text.replace(METRICS_END, f"\nEach pair is a run with /metrics off, then one "
                            f"with it on; the ratio is on over off.\n\n{table}\n{METRICS_END}")
        write_doc(text, METRICS_START, METRICS_END)
    return 0

if __name__ == "__main__":
    cli(main)
