"""Priority benchmark: an editor's requests next to a background flood (#28).

One daemon with 4 slots. A background flood sends 64 requests at once (`X-Priority:
background`), each a 64-token answer with the end tokens banned, so every one is due exactly 64
tokens. A steady interactive client sends one short request every 2 s. Three phases, one after
the other on one daemon: the interactive client alone (its idle TTFT), the flood alone (its
throughput), then both together. A fourth phase runs both with the flood sent at interactive
priority, as every request was before priority classes: what the editor waited then.
Targets: interactive TTFT p50 <= 1.5x idle; background throughput >= 0.8x the flood alone;
every background request completes with all its tokens.

    python -m benchmarks.bench_priority              # writes docs/benchmarks.md
    python -m benchmarks.bench_priority --no-write
"""

from __future__ import annotations

import argparse
import asyncio
import os
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
    free_port,
    publish,
    running,
    serve_command,
    stream_chat,
)

MARKERS = ("<!-- bench_priority:start -->", "<!-- bench_priority:end -->")
SLOTS, CTX = 4, 2048
FLOOD_TOKENS = 64
PERIOD_S, QUICK_TOKENS = 2.0, 8
# SmolLM2's end tokens (<|endoftext|>, <|im_end|>) banned: each flood answer runs to its cap.
NO_END = {"logit_bias": {"0": -100, "2": -100}}
BACKGROUND = {"X-Priority": "background"}


@dataclass
class Flood:
    seconds: float
    tokens: int
    short: int  # answers with fewer tokens than they were due, or that failed


async def flood(
    session: aiohttp.ClientSession, base: str, tag: str, background: bool, n: int
) -> Flood:
    t0 = time.perf_counter()
    samples = await asyncio.gather(
        *(
            stream_chat(
                session,
                base,
                "smollm2",
                f"{tag} request {i}: write a story about the number {i}.",
                FLOOD_TOKENS,
                extra=NO_END,
                headers=BACKGROUND if background else None,
            )
            for i in range(n)
        )
    )
    seconds = time.perf_counter() - t0
    short = sum(1 for s in samples if s.error or s.tokens != FLOOD_TOKENS)
    return Flood(seconds, sum(s.tokens for s in samples if not s.error), short)


async def interactive(
    session: aiohttp.ClientSession, base: str, tag: str, until: asyncio.Future[None] | None, n: int
) -> list[float]:
    """One short request every PERIOD_S: `n` of them, or as many as fit before `until` ends."""
    ttfts: list[float] = []
    i = 0
    while (until is None and i < n) or (until is not None and not until.done()):
        started = time.perf_counter()
        sample = await stream_chat(
            session, base, "smollm2", f"{tag} {i}: say hello to me.", QUICK_TOKENS
        )
        if sample.error or sample.ttft_s is None:
            raise RuntimeError(f"interactive request {i}: {sample.error or 'no answer'}")
        ttfts.append(sample.ttft_s)
        i += 1
        await asyncio.sleep(max(0.0, PERIOD_S - (time.perf_counter() - started)))
    return ttfts


async def both(base: str, tag: str, background: bool, n: int) -> tuple[list[float], Flood]:
    async with client_session() as session:
        flooding = asyncio.ensure_future(flood(session, base, tag, background, n))
        await asyncio.sleep(PERIOD_S)  # the flood fills the slots first
        ttfts = await interactive(session, base, f"{tag} editor", flooding, 0)
        return ttfts, await flooding


async def phases(base: str, n: int) -> dict[str, object]:
    async with client_session() as session:
        await stream_chat(session, base, "smollm2", "Hello", 4)  # warm-up
        idle = await interactive(session, base, "idle editor", None, 8)
        alone = await flood(session, base, "alone", True, n)
    with_priority = await both(base, "priority", True, n)
    without = await both(base, "fifo", False, n)
    return {"idle": idle, "alone": alone, "priority": with_priority, "fifo": without}


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--threads", type=int, default=len(os.sched_getaffinity(0)))
    p.add_argument("--flood", type=int, default=64, help="background requests sent at once")
    p.add_argument("--no-write", action="store_true", help="do not update docs/benchmarks.md")
    args = p.parse_args(argv)
    port = free_port()
    # Every local client shares 127.0.0.1, and one address may hold 64 connections in flight
    # (--max-connections-per-address): a flood of 64 takes them all, and the editor's request
    # would be refused before any priority applied. A user with a flood this wide raises it too.
    cmd = serve_command(
        ["--model", "smollm2", "--parallel", str(SLOTS), "--ctx", str(CTX)]
        + ["--threads", str(args.threads), "--max-connections-per-address", str(2 * args.flood)],
        port,
    )
    with tempfile.TemporaryDirectory(prefix="bench_priority_") as logdir:
        with running(cmd, port, "/health", Path(logdir) / "localserve.log") as base:
            got = asyncio.run(phases(base, args.flood))
    idle = statistics.median(got["idle"])  # type: ignore[arg-type]
    alone: Flood = got["alone"]  # type: ignore[assignment]
    rows, ratios = [], []
    for name, label in (("priority", "background"), ("fifo", "interactive (no classes)")):
        ttfts, fl = got[name]  # type: ignore[misc]
        ttft = statistics.median(ttfts)
        throughput = (fl.tokens / fl.seconds) / (alone.tokens / alone.seconds)
        rows.append(
            f"| flood at {label} priority | {len(ttfts)} | {ttft:.2f} | {ttft / idle:.2f}x "
            f"| {fl.tokens / fl.seconds:.1f} | {throughput:.2f}x | {fl.short} |"
        )
        ratios.append((name, ttft / idle, throughput, fl.short))
    table = [
        f"{SLOTS} slots of {CTX} tokens, {args.threads} threads. Flood: {args.flood} requests "
        f"at once, {FLOOD_TOKENS}-token answers (end tokens banned). Interactive: one "
        f"{QUICK_TOKENS}-token request every {PERIOD_S:g} s, greedy, streamed. "
        f"`--max-connections-per-address {2 * args.flood}`: at the default 64, the flood's "
        "connections leave none for the editor.",
        "",
        "| phase | interactive requests | interactive TTFT p50 (s) | / idle | flood tok/s "
        "| / flood alone | short answers |",
        "|---|---:|---:|---:|---:|---:|---:|",
        f"| interactive alone (idle) | {len(got['idle'])} | {idle:.2f} | 1.00x | | | |",  # type: ignore[arg-type]
        f"| flood alone | | | | {alone.tokens / alone.seconds:.1f} | 1.00x | {alone.short} |",
        *rows,
        "",
        f"- interactive TTFT with a background flood: {ratios[0][1]:.2f}x idle (target <= 1.5x; "
        f"{ratios[1][1]:.2f}x when the flood has no lower priority)",
        f"- background throughput next to the editor: {ratios[0][2]:.2f}x the flood alone "
        f"(target >= 0.8x); short answers: {ratios[0][3]}",
    ]
    title = "## Interactive requests next to a background flood (`bench_priority.py`)"
    facts = [f"Command: `{shlex.join(command(__file__, argv))}`"]
    publish(MARKERS, title, facts, table, not args.no_write)
    return 0


if __name__ == "__main__":
    cli(main)
