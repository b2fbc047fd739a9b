"""Long-prompt benchmark: how long running streams stall while a long prompt prefills.

Each server gets 4 slots. Three streams generate long answers; once they run, a ~2,700-token
prompt arrives. We report that prompt's time to first token and the gaps between the running
streams' tokens while it prefills (the longest, and the median of the per-round longest), over
several rounds; the servers take turns, one round each, in alternating order.

    python -m benchmarks.bench_long_prompt --llama-server BIN     # writes docs/benchmarks.md
    python -m benchmarks.bench_long_prompt --rounds 1 --no-write
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import shlex
import statistics
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
    free_port,
    llama_server_command,
    machine,
    running,
    serve_command,
    stream_chat,
    versions,
    write_doc,
)

START, END = "<!-- bench_long_prompt:start -->", "<!-- bench_long_prompt:end -->"
SLOTS, CTX = 4, 4096
RUNNING = 3
LONG_PROMPT = (
    " ".join(f"Fact {i}: the river Danube passes city number {i}." for i in range(170))
    + " Which city does it pass last?"
)


@dataclass
class Round:
    ttft_s: float
    max_gap_s: float


def server_command(name: str, model_path: str, port: int, threads: int, bin_: str) -> list[str]:
    if name == "localserve":
        return serve_command(
            [
                "--model",
                "smollm2",
                "--parallel",
                str(SLOTS),
                "--ctx",
                str(CTX),
                "--threads",
                str(threads),
            ],
            port,
        )
    return llama_server_command(bin_, model_path, port, SLOTS, CTX, threads)


async def one_round(session: aiohttp.ClientSession, base: str, i: int) -> Round:
    arrivals: list[list[float]] = [[] for _ in range(RUNNING)]
    runners = [
        asyncio.create_task(
            stream_chat(
                session,
                base,
                "smollm2",
                f"Write a very long story number {i}-{k}.",
                400,
                arrivals[k],
            )
        )
        for k in range(RUNNING)
    ]
    while not all(arrivals):  # every stream is decoding
        await asyncio.sleep(0.05)
    await asyncio.sleep(1.0)
    sent = time.perf_counter()
    # A different first fact each round: no server can reuse the previous round's prompt.
    prompt = f"Round {i}. " + LONG_PROMPT
    long = await stream_chat(session, base, "smollm2", prompt, 8)
    done = sent + (long.ttft_s or long.latency_s)
    results = await asyncio.gather(*runners)
    for sample in (long, *results):
        if sample.error:
            raise RuntimeError(sample.error)
    gaps = [b - a for times in arrivals for a, b in zip(times, times[1:]) if sent <= b <= done + 1]
    return Round(long.ttft_s or float("nan"), max(gaps, default=0.0))


async def bench(base: str, rounds: int, first: int = 0) -> list[Round]:
    async with client_session() as session:
        await stream_chat(session, base, "smollm2", "Hello", 4)  # warm-up
        return [await one_round(session, base, first + i) for i in range(rounds)]


def ratio_lines(rounds: dict[str, list[Round]]) -> list[str]:
    """localserve's medians over llama-server's, with the issue's targets (#27)."""
    if "llama-server" not in rounds or "localserve" not in rounds:
        return []
    ours, theirs = rounds["localserve"], rounds["llama-server"]
    ttft = statistics.median(r.ttft_s for r in ours) / statistics.median(r.ttft_s for r in theirs)
    gap = statistics.median(r.max_gap_s for r in ours) / statistics.median(
        r.max_gap_s for r in theirs
    )
    return [
        f"- long prompt TTFT, localserve / llama-server: {ttft:.2f}x (target <= 1.0x)",
        f"- longest decode gap, localserve / llama-server: {gap:.2f}x (target <= 0.15x)",
    ]


def summary(name: str, rounds: list[Round]) -> str:
    ttft = statistics.median(r.ttft_s for r in rounds)
    gap = statistics.median(r.max_gap_s for r in rounds)
    worst = max(r.max_gap_s for r in rounds)
    return f"| {name} | {len(rounds)} | {ttft:.1f} | {gap:.2f} | {worst:.2f} |"


HEADER = (
    "| server | rounds | long prompt TTFT, median (s) | longest decode gap, median (s) "
    "| longest decode gap, worst (s) |\n|---|---:|---:|---:|---:|"
)


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--threads", type=int, default=len(os.sched_getaffinity(0)))
    p.add_argument(
        "--llama-server",
        default=os.environ.get("LLAMA_SERVER", ""),
        metavar="BIN",
        help="llama.cpp's llama-server binary (env LLAMA_SERVER); without it only localserve runs",
    )
    p.add_argument("--no-write", action="store_true", help="do not update docs/benchmarks.md")
    args = p.parse_args(argv)
    from localserve.store.resolve import resolve

    model_path = resolve("smollm2").path
    servers = ["localserve"] + (["llama-server"] if args.llama_server else [])
    rounds: dict[str, list[Round]] = {name: [] for name in servers}
    print(f"{machine()}\n\n{HEADER}", flush=True)
    with tempfile.TemporaryDirectory(prefix="bench_long_prompt_") as logdir:
        # The servers take turns, one round each, in alternating order: a drift of the shared
        # machine's speed then weighs on both alike.
        for i in range(args.rounds):
            for name in servers if i % 2 == 0 else servers[::-1]:
                port = free_port()
                cmd = server_command(name, model_path, port, args.threads, args.llama_server)
                log = Path(logdir) / f"{name}-{i}.log"
                with running(cmd, port, "/health", log) as base:
                    rounds[name] += asyncio.run(bench(base, 1, first=i))
                print(f"round {i} {name}: {rounds[name][-1]}", flush=True)
    rows = [summary(name, rounds[name]) for name in servers]
    ratios = ratio_lines(rounds)
    print("\n".join([*rows, "", *ratios]), flush=True)
    if not args.no_write:
        text = "\n".join(
            [
                START,
                "## Long prompts next to running streams (`bench_long_prompt.py`)",
                "",
                *dated(),
                f"- Machine: {machine()}",
                f"- Versions: {versions()}, Python {platform.python_version()}",
                f"- Command: `{shlex.join(command(__file__, argv))}`",
                "",
                f"{SLOTS} slots of {CTX} tokens, {args.threads} threads. {RUNNING} streams "
                "generate long answers; then a ~2,700-token prompt arrives. *Decode gap* is the "
                "longest wait "
                "between two tokens of a running stream while that prompt prefills.",
                "",
                HEADER,
                *rows,
                "",
                *ratios,
                END,
            ]
        )
        write_doc(text, START, END)
    return 0


if __name__ == "__main__":
    cli(main)
