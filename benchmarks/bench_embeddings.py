"""Embeddings benchmark: embeddings per second for short inputs, batched against one at a time.

One localserve daemon (SmolLM2, 16 slots) gets one warm-up request, then the same N short
inputs (default 256) three ways through Ollama's /api/embed:

- one request carrying all N inputs;
- C concurrent requests (default 16), each carrying N / C inputs;
- N requests of one input each, sent one after the other (the baseline).

The first two share decode calls in the model's batcher; the baseline runs one input per call.
The ways take turns, `--rounds` times (so that the machine's drift falls on each alike); we
report each way's median round, with every round's errors counted, print a table as we go
and (unless --no-write) update docs/benchmarks.md.

    python -m benchmarks.bench_embeddings                             # full run, writes the doc
    python -m benchmarks.bench_embeddings --inputs 32 --rounds 1 --no-write   # smoke
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import shlex
import signal
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import aiohttp

from benchmarks._common import (
    cli,
    client_session,
    command,
    dated,
    div,
    free_port,
    machine,
    running,
    serve_command,
    versions,
    write_doc,
)

START, END = "<!-- bench_embeddings:start -->", "<!-- bench_embeddings:end -->"
MODEL = "smollm2"
SUBJECTS = [
    "the sea",
    "a red bicycle",
    "mountain weather",
    "old libraries",
    "fresh bread",
    "city traffic",
    "a quiet forest",
    "jazz music",
    "solar panels",
    "winter coats",
    "chess openings",
    "river boats",
    "garden tools",
    "night trains",
    "paper maps",
    "kitchen knives",
]


def short_inputs(n: int) -> list[str]:
    """N distinct short sentences of about ten tokens."""
    return [f"Note {i}: a few words about {SUBJECTS[i % len(SUBJECTS)]}." for i in range(n)]


@dataclass
class Way:
    name: str
    requests: int
    inputs: int
    wall_s: float
    errors: int

    @property
    def per_s(self) -> float:
        return self.inputs / self.wall_s if self.wall_s > 0 else 0.0


async def embed(session: aiohttp.ClientSession, base: str, texts: list[str]) -> int:
    """Embeds texts in one request; returns how many vectors came back (0 on an error)."""
    async with session.post(base + "/api/embed", json={"model": MODEL, "input": texts}) as r:
        if r.status != 200:
            print(f"  HTTP {r.status}: {(await r.text())[:200]}", file=sys.stderr)
            return 0
        return len((await r.json())["embeddings"])


async def one_request(session, base, texts) -> tuple[int, int]:
    return 1, await embed(session, base, texts)


async def concurrent(session, base, texts, concurrency: int) -> tuple[int, int]:
    parts = [texts[i::concurrency] for i in range(concurrency)]
    got = await asyncio.gather(*(embed(session, base, p) for p in parts if p))
    return len(got), sum(got)


async def sequential(session, base, texts) -> tuple[int, int]:
    got = 0
    for t in texts:
        got += await embed(session, base, [t])
    return len(texts), got


async def run_ways(base: str, n: int, concurrency: int, rounds: int) -> list[Way]:
    texts = short_inputs(n)
    ways = [
        ("one request", lambda s: one_request(s, base, texts)),
        (f"{concurrency} concurrent requests", lambda s: concurrent(s, base, texts, concurrency)),
        ("one input per request, sequential", lambda s: sequential(s, base, texts)),
    ]
    rounds_of: dict[str, list[Way]] = {name: [] for name, _ in ways}
    async with client_session() as session:
        await embed(session, base, texts[:4])  # warm-up: the first decode builds the graph
        for _ in range(rounds):
            for name, go in ways:
                t0 = time.perf_counter()
                requests, got = await go(session)
                way = Way(name, requests, n, time.perf_counter() - t0, n - got)
                print(row(way, None), flush=True)
                rounds_of[name].append(way)
    return [median_way(done) for done in rounds_of.values()]


def median_way(rounds: list[Way]) -> Way:
    """The way's median wall time (the lower middle of an even count, a round that really
    ran), with the errors of all its rounds."""
    middle = sorted(rounds, key=lambda w: w.wall_s)[(len(rounds) - 1) // 2]
    return Way(
        middle.name, middle.requests, middle.inputs, middle.wall_s, sum(w.errors for w in rounds)
    )


HEADER = (
    "| way | requests | inputs | wall (s) | embeddings/s | vs sequential | errors |\n"
    "|---|---:|---:|---:|---:|---:|---:|"
)


def row(way: Way, baseline: Way | None) -> str:
    ratio = div(way.per_s, baseline.per_s) if baseline else "-"
    return (
        f"| {way.name} | {way.requests} | {way.inputs} | {way.wall_s:.2f} | "
        f"{way.per_s:.1f} | {ratio} | {way.errors} |"
    )


def section(ways: list[Way], argv: list[str], threads: int) -> str:
    baseline = ways[-1]
    return "\n".join(
        [
            START,
            "## Embeddings throughput (`bench_embeddings.py`)",
            "",
            *dated(),
            f"- Machine: {machine()}",
            f"- Versions: {versions()}, Python {platform.python_version()}",
            f"- Model: `{MODEL}` (mean-pooled hidden states), `--parallel 16 --ctx 512 "
            f"--threads {threads}`",
            f"- Command: `{shlex.join(argv)}`",
            "",
            "Short inputs (about ten tokens) through Ollama's /api/embed; the median of the "
            "rounds, which took turns; errors are those of all rounds. "
            "Batched ways share decode calls: each embedding step fills the free slots, up to the "
            "step's row bound (84 rows for SmolLM2).",
            "",
            HEADER,
            *(row(w, baseline) for w in ways),
            END,
        ]
    )


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--inputs", type=int, default=256)
    p.add_argument("--concurrency", type=int, default=16)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--threads", type=int, default=len(os.sched_getaffinity(0)))
    p.add_argument("--no-write", action="store_true", help="do not update docs/benchmarks.md")
    return p.parse_args(argv)


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    port = free_port()
    cmd = serve_command(
        ["--model", MODEL, "--parallel", "16", "--ctx", "512", "--threads", str(args.threads)], port
    )
    print(f"{machine()}\n\n{HEADER}", flush=True)
    with tempfile.TemporaryDirectory(prefix="bench_embeddings_") as logdir:
        with running(cmd, port, "/health", Path(logdir) / "localserve.log") as base:
            ways = asyncio.run(run_ways(base, args.inputs, args.concurrency, args.rounds))
    print("\n" + "\n".join(row(w, ways[-1]) for w in ways))
    if not args.no_write:
        here = command(__file__, argv)
        write_doc(section(ways, here, args.threads), START, END)
    return 0


if __name__ == "__main__":
    cli(main)
