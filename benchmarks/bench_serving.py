"""Serving benchmark: localserve against llama-cpp-python's own server, on the same GGUF.

Each server runs alone (never both at once, so they do not fight over cores), gets one
warm-up request, then for every concurrency level C, C workers send streamed chat
completions back to back. Per level we report aggregate completion tokens/s and TTFT
p50/p95, print a table as we go and (unless --no-write) update docs/benchmarks.md.

    python benchmarks/bench_serving.py                      # full run, writes the doc
    python benchmarks/bench_serving.py --concurrency 1,2 --max-tokens 16 --rounds 1 --no-write
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
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp

REPO = Path(__file__).resolve().parent.parent
DOC = REPO / "docs" / "benchmarks.md"
START, END = "<!-- bench_serving:start -->", "<!-- bench_serving:end -->"
# "llama-cpp-python" gets localserve's thread count; "-default" runs it exactly as shipped
# (cpu_count // 2 threads), which is the baseline the engine issue names.
SERVERS = ("localserve", "llama-cpp-python", "llama-cpp-python-default")
BASELINES = SERVERS[1:]
READY_TIMEOUT_S = 180.0

# Open-ended asks, so greedy answers tend to run past --max-tokens instead of stopping early.
PROMPTS = [
    "Write a long story about a lighthouse keeper who finds a message in a bottle.",
    "Explain in detail how a car engine works, step by step.",
    "Write a long essay about the history of the printing press and its effects on society.",
    "Explain in detail how the internet routes a packet from one computer to another.",
    "Write a long story about a dragon who is afraid of heights.",
    "Describe in detail the water cycle and why it matters for life on Earth.",
    "Write a detailed guide to planting and caring for a vegetable garden.",
    "Explain in detail how vaccines train the immune system.",
    "Write a long story about two friends who get lost in a big city at night.",
    "Describe in detail a day in the life of a medieval blacksmith.",
    "Explain in detail how photosynthesis works in plants.",
    "Write a long letter from a sailor to his family describing a voyage across the ocean.",
    "Explain in detail how a computer compiles and runs a program.",
    "Write a long story about a robot who wants to learn how to paint.",
    "Describe in detail the causes and effects of the French Revolution.",
    "Write a detailed recipe for baking bread at home, explaining every step.",
    "Explain in detail how airplanes stay in the air.",
    "Write a long story about a village that wakes up to find the sea has disappeared.",
    "Describe in detail how to plan a two-week trip around Europe.",
    "Explain in detail how earthquakes happen and how buildings are made to survive them.",
]


@dataclass
class Sample:
    ttft_s: float | None
    tokens: int
    error: str | None = None


@dataclass
class Level:
    server: str
    concurrency: int
    wall_s: float
    samples: list[Sample] = field(default_factory=list)

    @property
    def ok(self) -> list[Sample]:
        return [s for s in self.samples if s.error is None]

    @property
    def tokens(self) -> int:
        return sum(s.tokens for s in self.ok)

    @property
    def tok_s(self) -> float:
        return self.tokens / self.wall_s if self.wall_s > 0 else 0.0

    def ttft(self, q: float) -> float:
        return percentile([s.ttft_s for s in self.ok if s.ttft_s is not None], q)


def percentile(values: list[float], q: float) -> float:
    """Linear interpolation between closest ranks (numpy's default), without numpy."""
    if not values:
        return float("nan")
    xs = sorted(values)
    pos = (len(xs) - 1) * q
    lo = int(pos)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


# --- servers -------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def server_command(name: str, model_path: str, port: int, threads: int) -> tuple[list[str], str]:
    """The argv that starts a server, and the path that answers 200 once it can serve."""
    py = sys.executable
    if name == "localserve":
        cmd = [py, "-m", "localserve", "serve", "--model", "smollm2", "--host", "127.0.0.1",
               "--port", str(port), "--parallel", "16", "--ctx", "2048",
               "--threads", str(threads)]
        return cmd, "/health"
    cmd = [py, "-m", "llama_cpp.server", "--model", model_path, "--host", "127.0.0.1",
           "--port", str(port), "--n_ctx", "2048", "--interrupt_requests", "False"]
    if name == "llama-cpp-python":
        # llama_cpp.server defaults to cpu_count // 2 decode threads while localserve uses all
        # cores; pinning both to the same count keeps the comparison about serving.
        cmd += ["--n_threads", str(threads), "--n_threads_batch", str(threads)]
    return cmd, "/v1/models"


def wait_ready(proc: subprocess.Popen[bytes], url: str, log: Path) -> None:
    # No proxies: an http_proxy in the environment must not reroute polls of 127.0.0.1.
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    deadline = time.monotonic() + READY_TIMEOUT_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited with {proc.returncode}:\n{tail(log)}")
        with contextlib.suppress(OSError):
            with opener.open(url, timeout=2) as r:
                if r.status == 200:
                    return
        time.sleep(0.25)
    raise RuntimeError(f"server not ready after {READY_TIMEOUT_S:.0f}s:\n{tail(log)}")


def tail(path: Path, n: int = 30) -> str:
    return "\n".join(path.read_text(errors="replace").splitlines()[-n:])


def stop(proc: subprocess.Popen[bytes]) -> None:
    try:
        proc.terminate()
        proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        pass
    finally:
        # Also reached on a second Ctrl-C during the wait: never leave a server behind.
        if proc.poll() is None:
            proc.kill()
            proc.wait()


@contextlib.contextmanager
def running_server(name: str, model_path: str, threads: int, logdir: Path) -> Iterator[str]:
    port = free_port()
    cmd, ready_path = server_command(name, model_path, port, threads)
    log = logdir / f"{name}.log"
    with log.open("wb") as out:
        # Own session: a Ctrl-C in the terminal reaches only us, and we stop the server in order.
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, cwd=REPO,
                                start_new_session=True)
    try:
        base = f"http://127.0.0.1:{port}"
        wait_ready(proc, base + ready_path, log)
        yield base
    finally:
        stop(proc)


# --- client --------------------------------------------------------------------------


async def model_id(session: aiohttp.ClientSession, base: str) -> str:
    async with session.get(base + "/v1/models") as r:
        r.raise_for_status()
        return (await r.json())["data"][0]["id"]


async def one_request(
    session: aiohttp.ClientSession, base: str, model: str, prompt: str, max_tokens: int
) -> Sample:
    body = {
        "model": model,
        "messages": [{"role": "user", "content": prompt}],
        "max_tokens": max_tokens,
        "temperature": 0,
        "stream": True,
        # llama_cpp.server ignores this field; then we fall back to counting content chunks.
        "stream_options": {"include_usage": True},
    }
    t0 = time.perf_counter()
    ttft: float | None = None
    chunks = 0
    usage_tokens: int | None = None
    try:
        async with session.post(base + "/v1/chat/completions", json=body) as r:
            if r.status != 200:
                return Sample(None, 0, f"HTTP {r.status}: {(await r.text())[:200]}")
            async for raw in r.content:
                line = raw.strip()
                if not line.startswith(b"data:"):
                    continue  # blank separators and ": ping" comments
                data = line[5:].strip()
                if data == b"[DONE]":
                    break
                event = json.loads(data)
                if "error" in event:
                    return Sample(ttft, chunks, str(event["error"])[:200])
                if event.get("usage"):
                    usage_tokens = event["usage"].get("completion_tokens")
                for choice in event.get("choices") or []:
                    if (choice.get("delta") or {}).get("content"):
                        chunks += 1
                        if ttft is None:
                            ttft = time.perf_counter() - t0
    except (aiohttp.ClientError, asyncio.TimeoutError) as exc:
        return Sample(ttft, chunks, f"{type(exc).__name__}: {exc}")
    return Sample(ttft, usage_tokens if usage_tokens is not None else chunks)


async def run_level(
    session: aiohttp.ClientSession, server: str, base: str, model: str,
    concurrency: int, rounds: int, max_tokens: int,
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
            samples.append(await one_request(session, base, model, PROMPTS[i % len(PROMPTS)],
                                             max_tokens))

    t0 = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return Level(server, concurrency, time.perf_counter() - t0, samples)


async def bench_server(
    server: str, base: str, levels: list[int], rounds: int, max_tokens: int
) -> list[Level]:
    # Queued requests on a serial server can wait minutes; only a stalled read is an error.
    timeout = aiohttp.ClientTimeout(total=None, sock_read=600)
    async with aiohttp.ClientSession(timeout=timeout,
                                     connector=aiohttp.TCPConnector(limit=0)) as session:
        model = await model_id(session, base)
        warm = await one_request(session, base, model, PROMPTS[0], min(16, max_tokens))
        if warm.error:
            raise RuntimeError(f"{server} warm-up failed: {warm.error}")
        results = []
        for c in levels:
            level = await run_level(session, server, base, model, c, rounds, max_tokens)
            print(row(level), flush=True)
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


def ratio_table(levels: list[Level], baseline: str) -> str:
    by = {(lv.server, lv.concurrency): lv for lv in levels}
    lines = ["| concurrency | tok/s ratio (higher is better) | TTFT p50 ratio (lower is better) "
             "| TTFT p95 ratio |", "|---:|---:|---:|---:|"]
    for c in sorted({lv.concurrency for lv in levels}):
        ours, base = by.get(("localserve", c)), by.get((baseline, c))
        if ours is None or base is None:
            continue
        lines.append(f"| {c} | {div(ours.tok_s, base.tok_s)} | "
                     f"{div(ours.ttft(0.5), base.ttft(0.5))} | "
                     f"{div(ours.ttft(0.95), base.ttft(0.95))} |")
    return "\n".join(lines) if len(lines) > 2 else ""


def div(a: float, b: float) -> str:
    return f"{a / b:.2f}x" if b and b == b and a == a else "n/a"


def machine() -> str:
    cpu = platform.processor() or "unknown CPU"
    with contextlib.suppress(OSError):
        m = re.search(r"^model name\s*:\s*(.+)$", Path("/proc/cpuinfo").read_text(), re.M)
        if m:
            cpu = m.group(1).strip()
    return f"{len(os.sched_getaffinity(0))} CPUs (nproc), {cpu}"


def versions() -> str:
    from importlib.metadata import version

    return ", ".join(f"{p} {version(p)}" for p in ("localserve", "llama_cpp_python"))


def section(levels: list[Level], argv: list[str], model_path: str) -> str:
    parts = [
        START,
        "## Serving throughput and latency (`bench_serving.py`)",
        "",
        f"- Date: {dt.datetime.now(dt.timezone.utc):%Y-%m-%d %H:%M UTC}",
        f"- Machine: {machine()}",
        f"- Versions: {versions()}, Python {platform.python_version()}",
        f"- Model: `{Path(model_path).name}`",
        f"- Command: `{shlex.join(argv)}`",
        "",
        "Streamed chat completions, greedy. *agg tok/s* is all completion tokens of a level "
        "over its wall time; TTFT is send to first content chunk; *avg tokens* shows how "
        "close answers came to `--max-tokens` (early EOS makes them shorter).",
        "",
        HEADER,
        *(row(lv) for lv in levels),
    ]
    for baseline in BASELINES:
        ratios = ratio_table(levels, baseline)
        if ratios:
            parts += ["", f"localserve / {baseline}:", "", ratios]
    return "\n".join(parts + [END])


def write_doc(text: str) -> None:
    if DOC.exists():
        doc = DOC.read_text()
    else:
        doc = ("# Benchmarks\n\nRun from the repository root with the bench extra installed "
               "(`pip install -e '.[bench]'`):\n\n"
               "```\npython benchmarks/bench_serving.py\n```\n\n"
               "Each run replaces its own section below; see `--help` for options.\n")
    pattern = re.compile(re.escape(START) + r".*?" + re.escape(END), re.S)
    if pattern.search(doc):
        doc = pattern.sub(lambda _: text, doc)
    else:
        doc = doc.rstrip("\n") + "\n\n" + text
    DOC.parent.mkdir(parents=True, exist_ok=True)
    DOC.write_text(doc.rstrip("\n") + "\n")


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
    p.add_argument("--no-write", action="store_true", help="do not update docs/benchmarks.md")
    args = p.parse_args(argv)
    args.servers = [s.strip() for s in args.servers.split(",") if s.strip()]
    unknown = set(args.servers) - set(SERVERS)
    if unknown:
        p.error(f"unknown server(s): {', '.join(sorted(unknown))}")
    return args


def main(argv: list[str]) -> int:
    args = parse_args(argv)
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
                                                   args.rounds, args.max_tokens))
    for baseline in BASELINES:
        ratios = ratio_table(levels, baseline)
        if ratios:
            print(f"\nlocalserve / {baseline}:\n{ratios}")
    if not args.no_write:
        cmd = ["python", str(Path(__file__).resolve().relative_to(REPO)), *argv]
        write_doc(section(levels, cmd, model_path))
        print(f"\nwrote {DOC.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except KeyboardInterrupt:
        sys.exit(130)
