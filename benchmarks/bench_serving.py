"""Serving benchmark: localserve against llama-cpp-python's own server, on the same GGUF.

Each server runs alone (never both at once, so they do not fight over cores), gets one
warm-up request, then for every concurrency level C, C workers send streamed chat
completions back to back. Per level we report aggregate completion tokens/s and TTFT
p50/p95, print a table as we go and (unless --no-write) update docs/benchmarks.md.

The servers are in _serving_servers.py; the records, their tables and the doc sections in
_serving_report.py.

    python -m benchmarks.bench_serving                      # full run, writes the doc
    python -m benchmarks.bench_serving --concurrency 1,2 --max-tokens 16 --rounds 1 --no-write
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import signal
import statistics
import sys
import tempfile
import time
from pathlib import Path

import aiohttp

from benchmarks import _serving_servers
from benchmarks._common import (
    PROMPTS,
    Sample,
    cli,
    client_session,
    command,
    machine,
    stream_chat,
    write_doc,
)
from benchmarks._serving_report import (
    BASE_END,
    BASE_START,
    BASE_TITLE,
    COLD_END,
    COLD_START,
    HEADER,
    METRICS_END,
    METRICS_START,
    Level,
    overhead_ratios,
    ratio_pairs,
    ratio_table,
    record_markers,
    row,
    section,
)
from benchmarks._serving_servers import BASE, NO_METRICS, SERVERS, running_server

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
    session: aiohttp.ClientSession,
    server: str,
    base: str,
    model: str,
    concurrency: int,
    rounds: int,
    max_tokens: int,
    cold: bool = False,
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
            samples.append(
                await stream_chat(
                    session, base, model, prompt_for(i, concurrency, cold), max_tokens
                )
            )

    t0 = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return Level(server, concurrency, time.perf_counter() - t0, samples)


async def bench_server(
    server: str,
    base: str,
    levels: list[int],
    rounds: int,
    max_tokens: int,
    cold: bool,
    turn: int = 0,
    scrape_s: float = 0.0,
) -> list[Level]:
    async with client_session() as session:
        model = await model_id(session, base)
        warm = await stream_chat(session, base, model, PROMPTS[0], min(16, max_tokens))
        if warm.error:
            raise RuntimeError(f"{server} warm-up failed: {warm.error}")
        scraper = asyncio.create_task(scrape(session, base, scrape_s)) if scrape_s else None
        results = []
        try:
            for c in levels:
                level = await run_level(session, server, base, model, c, rounds, max_tokens, cold)
                level.round = turn
                print(row(level), flush=True)
                for error in sorted({s.error for s in level.samples if s.error}):
                    print(f"  {server} error: {error}", flush=True)
                results.append(level)
        finally:
            if scraper is not None:
                # A scrape that failed fails the run, rather than going unseen.
                failed = scraper.done() and scraper.exception()
                scraper.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await scraper
                if failed:
                    raise failed
        return results


async def scrape(session: aiohttp.ClientSession, base: str, every_s: float) -> None:
    """GET /metrics every `every_s` seconds, as the web page does while it is open, so that
    the "on" half pays for rendering the metrics, not only for keeping them."""
    while True:
        async with session.get(f"{base}/metrics") as response:
            response.raise_for_status()
            await response.read()
        await asyncio.sleep(every_s)


# --- main ----------------------------------------------------------------------------


def csv_ints(s: str) -> list[int]:
    return [int(x) for x in s.split(",") if x.strip()]


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument(
        "--servers", default=",".join(SERVERS), help=f"comma-separated, from: {', '.join(SERVERS)}"
    )
    p.add_argument("--concurrency", type=csv_ints, default=[1, 4, 8, 16])
    p.add_argument("--max-tokens", type=int, default=128)
    p.add_argument(
        "--rounds", type=int, default=2, help="requests per level = max(concurrency, 8) * rounds"
    )
    p.add_argument(
        "--threads",
        type=int,
        default=len(os.sched_getaffinity(0)),
        help="CPU threads given to each server (default: all usable cores)",
    )
    p.add_argument(
        "--cold",
        action="store_true",
        help="give every request a prompt no server has seen (no cached prefix beyond "
        "the chat template's opening)",
    )
    p.add_argument(
        "--alternate",
        type=int,
        default=1,
        metavar="N",
        help="run the servers in turn N times, the order reversed every other pass (a, b, "
        "b, a, ...: going first costs about 7 %%); ratios are the medians of each pass's ratio",
    )
    p.add_argument("--no-write", action="store_true", help="do not update docs/benchmarks.md")
    p.add_argument(
        "--metrics-overhead",
        type=int,
        default=0,
        metavar="N",
        help=f"instead: N pairs of {NO_METRICS} and localserve, in alternating order, with "
        "/metrics scraped every --scrape seconds while it is on; the median and spread of "
        "the pairs' tok/s ratios (a section of its own; at least 7 pairs to write it)",
    )
    p.add_argument(
        "--scrape",
        type=float,
        default=2.0,
        metavar="S",
        help="with --metrics-overhead: seconds between scrapes of /metrics (the web page's "
        "period); 0 for none",
    )
    p.add_argument(
        "--llama-server",
        default=_serving_servers.LLAMA_SERVER_BIN,
        metavar="BIN",
        help="llama.cpp's llama-server binary (env LLAMA_SERVER); without it that "
        "server is skipped",
    )
    p.add_argument(
        "--baseline-tree",
        default="",
        metavar="DIR",
        help=f"also run {BASE}: localserve imported from the checkout DIR (the code "
        "before a change), so old and new code are measured in one run",
    )
    args = p.parse_args(argv)
    args.servers = [s.strip() for s in args.servers.split(",") if s.strip()]
    if not args.llama_server and "llama-server" in args.servers:
        args.servers.remove("llama-server")
    if not args.baseline_tree and BASE in args.servers:
        args.servers.remove(BASE)
    if args.metrics_overhead:
        if args.metrics_overhead < 7 and not args.no_write:
            p.error("--metrics-overhead needs at least 7 pairs to write its section")
        # Alternating order: off-on, on-off, ... so that neither side always runs first.
        pair = [NO_METRICS, "localserve"]
        args.servers = [
            s for i in range(args.metrics_overhead) for s in (pair if i % 2 == 0 else pair[::-1])
        ]
    unknown = set(args.servers) - {*SERVERS, NO_METRICS}
    if unknown:
        p.error(f"unknown server(s): {', '.join(sorted(unknown))}")
    return args


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    _serving_servers.LLAMA_SERVER_BIN = args.llama_server
    _serving_servers.BASELINE_TREE = args.baseline_tree
    from localserve.store.resolve import resolve

    model_path = resolve("smollm2").path
    # SIGTERM becomes SystemExit, so the `finally` that stops the server still runs.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    print(f"model: {model_path}\n{machine()}\n\n{HEADER}", flush=True)
    levels: list[Level] = []
    with tempfile.TemporaryDirectory(prefix="bench_serving_") as logdir:
        for turn in range(args.alternate):
            # No server always goes first: the first run of a pass measured ~7 % slower.
            for server in args.servers if turn % 2 == 0 else args.servers[::-1]:
                with running_server(server, model_path, args.threads, Path(logdir)) as base:
                    levels += asyncio.run(
                        bench_server(
                            server,
                            base,
                            args.concurrency,
                            args.rounds,
                            args.max_tokens,
                            args.cold,
                            turn,
                            args.scrape if args.metrics_overhead and server == "localserve" else 0,
                        )
                    )
    if args.metrics_overhead:
        return report_overhead(levels, args, argv, model_path)
    for ours, baseline in ratio_pairs():
        ratios = ratio_table(levels, baseline, ours)
        if ratios:
            print(f"\n{ours} / {baseline}:\n{ratios}")
    if not args.no_write:
        cmd = command(__file__, argv)
        markers, title = record_markers(), ""
        if args.cold:
            markers = (COLD_START, COLD_END)
        elif BASE in args.servers and "llama-server" not in args.servers:
            markers, title = (BASE_START, BASE_END), BASE_TITLE
        write_doc(section(levels, cmd, model_path, args.cold, markers, title), *markers)
    return 0


def report_overhead(
    levels: list[Level], args: argparse.Namespace, argv: list[str], model_path: str
) -> int:
    lines = [
        "| concurrency | on / off, each pair | median | spread (min-max) | interquartile "
        "| target >= 0.98x |",
        "|---:|---|---:|---:|---:|---|",
    ]
    for c, ratios in overhead_ratios(levels).items():
        median = statistics.median(ratios)
        q1, _, q3 = (
            statistics.quantiles(ratios, n=4, method="inclusive")
            if len(ratios) > 1
            else (median,) * 3
        )
        lines.append(
            f"| {c} | {', '.join(f'{r:.2f}' for r in ratios)} | {median:.2f}x | "
            f"{min(ratios):.2f}-{max(ratios):.2f} | {q1:.2f}-{q3:.2f} | "
            f"{'met' if median >= 0.98 else 'missed'} |"
        )
    table = "\n".join(lines)
    print(f"\nlocalserve (/metrics on) / {NO_METRICS}, pairwise:\n{table}")
    if not args.no_write:
        cmd = command(__file__, argv)
        title = (
            "## Metrics overhead (`bench_serving.py --metrics-overhead`): the serving "
            "benchmark with /metrics on and off, alternately"
        )
        text = section(levels, cmd, model_path, False, (METRICS_START, METRICS_END), title)
        text = text.replace(
            METRICS_END,
            f"\nEach pair is a run with /metrics off and one with it on, in alternating "
            f"order (off first in odd pairs, on first in even ones); while it is on, /metrics "
            f"is scraped every {args.scrape:g} s, as the web page does. The ratio is on over "
            f"off.\n\n{table}\n{METRICS_END}",
        )
        write_doc(text, METRICS_START, METRICS_END)
    return 0


if __name__ == "__main__":
    cli(main)
