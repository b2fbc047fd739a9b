"""Abuse benchmark: legitimate streams while idle and trickling sockets try to hold every
connection of the daemon (issue #26: idle connections once locked everyone out).

One daemon (smollm2, 8 slots) serves five runs in turn: quiet; then two attacks, each from
127.0.0.1, the address every local client shares, and spread over 127.0.0.2 onwards (--spread
addresses). The heads attack: --idle sockets that send nothing and --tricklers that send a
request head a byte a second. The bodies attack (issue #45): --bodies sockets that send a whole
head and then trickle its body a byte a second, so that each is a request the daemon has begun.
Each attack socket is reopened a second after the daemon cuts it; the attack is a process of
its own (_abuse_attack.py). In each run, 8 workers send streamed chat completions back to back
(8 x --rounds), while the CLI's status calls (health, stats) are made every half second.
Reported: the legitimate requests and status calls served of those sent, TTFT p50 and its
ratio to the quiet run's (target within 1.5x), tokens/s, the attack sockets
the daemon cut, and the CPU the daemon's own process (which takes every connection; the model
runs in its worker) and the attack spent: on a machine with few cores the attack's own CPU
is taken from the model, which shows in tokens/s.

    python -m benchmarks.bench_abuse                          # writes docs/benchmarks.md
    python -m benchmarks.bench_abuse --rounds 1 --no-write
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import select
import shlex
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import psutil

from benchmarks._common import (
    PROMPTS,
    REPO,
    Results,
    Sample,
    cli,
    client_session,
    command,
    dated,
    div,
    free_port,
    machine,
    running,
    serve_command,
    stream_chat,
    write_doc,
)
from localserve.client import Client, ClientError
from localserve.server.http.front import allow_descriptors
from tests.support.daemons import get_json

START, END = "<!-- bench_abuse:start -->", "<!-- bench_abuse:end -->"
STREAMS = 8
TARGET = 1.5  # TTFT p50 under attack, at most this times the quiet one
READY_TIMEOUT_S = 120.0
SETTLE_S = 2.0  # for the attack's reopening to reach its pace before the streams start
HEADER = (
    "| run | requests served | TTFT p50 (s) | vs quiet | tok/s (vs quiet) | status calls served "
    "| attack sockets opened | cut: 408 / unanswered / 503 | daemon CPU | attack CPU "
    "| target |\n"
    "|---|---:|---:|---:|---:|---:|---:|---|---:|---:|---|"
)


@dataclass
class Run(Results):
    name: str
    wall_s: float
    samples: list[Sample]
    probes: list[str | None] = field(default_factory=list)  # each status call: None or why not
    attack: dict[str, int] = field(default_factory=dict)
    # % of one core over the run: the daemon's own process (its loop takes every connection;
    # the model runs in its worker), and the attack's
    cpu: dict[str, float] = field(default_factory=dict)


def cpu_seconds(pid: int | None) -> float:
    if pid is None:
        return 0.0
    times = psutil.Process(pid).cpu_times()
    return times.user + times.system


async def streams(base: str, rounds: int, max_tokens: int) -> tuple[float, list[Sample]]:
    samples: list[Sample] = []
    async with client_session() as session:

        async def worker(w: int) -> None:
            for r in range(rounds):
                prompt = PROMPTS[(w + r * STREAMS) % len(PROMPTS)]
                samples.append(await stream_chat(session, base, "smollm2", prompt, max_tokens))

        t0 = time.perf_counter()
        await asyncio.gather(*(worker(w) for w in range(STREAMS)))
        return time.perf_counter() - t0, samples


def status_once(base: str) -> str | None:
    """What `localserve status` asks, through its client (with the operator token): None when
    it was answered, else why not."""
    client = Client(base, timeout=30.0)
    try:
        client.health()
        client.stats()
    except ClientError as exc:
        return str(exc)[:200]
    return None


async def measured(
    name: str, base: str, args: argparse.Namespace, daemon: int, attack: int | None = None
) -> Run:
    probes: list[str | None] = []
    done = asyncio.Event()

    async def probe() -> None:
        while not done.is_set():
            probes.append(await asyncio.to_thread(status_once, base))
            await asyncio.sleep(0.5)

    before = {"daemon": cpu_seconds(daemon), "attack": cpu_seconds(attack)}
    prober = asyncio.create_task(probe())
    try:
        wall, samples = await streams(base, args.rounds, args.max_tokens)
    finally:
        done.set()
        await prober
    after = {"daemon": cpu_seconds(daemon), "attack": cpu_seconds(attack)}
    cpu = {k: 100 * (after[k] - before[k]) / wall for k in before}
    return Run(name, wall, samples, probes, cpu=cpu)


def attacked(
    name: str,
    base: str,
    daemon: int,
    sources: list[str],
    counts: tuple[int, int, int],
    args: argparse.Namespace,
) -> Run:
    """A run under attack: `counts` are the idle, head-trickling and body-trickling sockets."""
    port = int(base.rsplit(":", 1)[1])
    cmd = [sys.executable, "-m", "benchmarks._abuse_attack", str(port)]
    cmd += [*(str(n) for n in counts), *sources]
    proc = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        started = select.select([proc.stdout], [], [], READY_TIMEOUT_S)[0]
        line = proc.stdout.readline() if started else ""
        if line.strip() != "ready":
            raise RuntimeError(f"the attack did not start within {READY_TIMEOUT_S:g} s: {line!r}")
        time.sleep(SETTLE_S)
        run = asyncio.run(measured(name, base, args, daemon, proc.pid))
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            out, _ = proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, _ = proc.communicate()
    run.attack = json.loads(out.strip().splitlines()[-1]) if out.strip() else {}
    return run


def row(run: Run, quiet: Run | None) -> str:
    ttft = run.ttft(0.5)
    ratio = div(ttft, quiet.ttft(0.5)) if quiet is not None and run is not quiet else ""
    tok_ratio = f" ({div(run.tok_s, quiet.tok_s)})" if quiet is not None and ratio else ""
    a = run.attack
    cut = f"{a.get('cut_408', 0)} / {a.get('cut_unanswered', 0)} / {a.get('cut_503', 0)}"
    verdict = ""
    if quiet is not None and run is not quiet:
        met = (
            len(run.ok) == len(run.samples)
            and not any(run.probes)
            and ttft <= TARGET * quiet.ttft(0.5)
        )
        verdict = f"all served, TTFT p50 <= {TARGET:g}x: {'met' if met else 'missed'}"
    return (
        f"| {run.name} | {len(run.ok)} of {len(run.samples)} | {ttft:.3f} | {ratio} | "
        f"{run.tok_s:.1f}{tok_ratio} | {run.probes.count(None)} of {len(run.probes)} | "
        f"{a.get('opened', '') if a else ''} | {cut if a else ''} | "
        f"{run.cpu.get('daemon', 0):.0f} % | {run.cpu.get('attack', 0):.0f} % | {verdict} |"
    )


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rounds", type=int, default=4, help="requests per stream and run")
    p.add_argument("--max-tokens", type=int, default=64)
    p.add_argument("--idle", type=int, default=1000, help="attack sockets that send nothing")
    p.add_argument("--tricklers", type=int, default=300, help="attack sockets trickling a head")
    p.add_argument(
        "--bodies", type=int, default=400, help="attack sockets trickling a body after a head"
    )
    p.add_argument(
        "--spread",
        type=int,
        default=100,
        help="addresses (127.0.0.2 onwards) the spread run's attack comes from (0: no such run)",
    )
    p.add_argument("--threads", type=int, default=len(os.sched_getaffinity(0)))
    p.add_argument("--no-write", action="store_true", help="do not update docs/benchmarks.md")
    return p.parse_args(argv)


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    # The attack's sockets and the daemon's (it inherits this) must not run out of descriptors.
    allow_descriptors(args.idle + args.tricklers + args.bodies + 1024)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    port = free_port()
    daemon = ["--model", "smollm2", "--parallel", str(STREAMS), "--ctx", "2048"]
    cmd = serve_command([*daemon, "--threads", str(args.threads)], port)
    print(f"{machine()}\n\n{HEADER}", flush=True)
    runs: list[Run] = []
    with tempfile.TemporaryDirectory(prefix="bench_abuse_") as tmp:
        with running(cmd, port, "/health", Path(tmp) / "daemon.log") as base:
            asyncio.run(streams(base, 1, 8))  # warm-up: the model's first steps
            daemon_pid = int(get_json(f"{base}/api/admin/stats")["pid"])
            quiet = asyncio.run(measured("quiet", base, args, daemon_pid))
            runs.append(quiet)
            print(row(quiet, quiet), flush=True)
            origins = [("127.0.0.1", ["127.0.0.1"])]
            if args.spread:
                # Loopback is the whole of 127/8: 127.0.0.2, ..., 127.0.0.255, 127.0.1.0, ...
                spread = [f"127.0.{(i + 2) // 256}.{(i + 2) % 256}" for i in range(args.spread)]
                origins.append((f"{spread[0]}-{spread[-1]}", spread))
            kinds = [("heads", (args.idle, args.tricklers, 0)), ("bodies", (0, 0, args.bodies))]
            for (kind, counts), (origin, sources) in itertools.product(kinds, origins):
                name = f"{kind} from {origin}"
                runs.append(attacked(name, base, daemon_pid, sources, counts, args))
                print(row(runs[-1], quiet), flush=True)
                print(f"  attack saw: {json.dumps(runs[-1].attack)}", flush=True)
                errors = {s.error for s in runs[-1].samples} | set(runs[-1].probes)
                for error in sorted(e for e in errors if e):
                    print(f"  error: {error}", flush=True)
    if not args.no_write:
        section = "\n".join(
            [
                START,
                "## Idle and trickling connections (`bench_abuse.py`)",
                "",
                *dated(),
                f"- Machine: {machine()}",
                f"- Command: `{shlex.join(command(__file__, argv))}`",
                f"- Daemon: `{' '.join(daemon)}`, the connection settings at their defaults.",
                f"- Each run: {STREAMS} streamed chat completions at a time, {args.rounds} each, "
                f"{args.max_tokens} tokens at most; the status calls every 0.5 s beside them.",
                f"- Heads: {args.idle} sockets sending nothing and {args.tricklers} sending a "
                f"head a byte a second; bodies: {args.bodies} sending a whole head and then its "
                "body a byte a second; each reopened a second after the daemon cuts it.",
                "",
                HEADER,
                *(row(run, quiet) for run in runs),
                END,
            ]
        )
        write_doc(section, START, END)
    return 0


if __name__ == "__main__":
    cli(main)
