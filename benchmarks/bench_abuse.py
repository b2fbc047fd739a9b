"""Abuse benchmark: legitimate streams while idle, trickling and non-reading sockets try to hold
every connection of the daemon (issue #26: idle connections once locked everyone out).

One daemon (smollm2, 8 slots) serves seven runs in turn: quiet; then three attacks, each from
127.0.0.1, the address every local client shares, and spread over 127.0.0.2 onwards (--spread
addresses). The heads attack: --idle sockets that send nothing and --tricklers that send a
request head a byte a second. The bodies attack (issue #45): --bodies sockets that send a whole
head and then trickle its body a byte a second, so that each is a request the daemon has begun.
The readers attack (issue #57): --readers sockets that ask for a file of READER_FILE_BYTES
(`GET /v1/files/ID/content`), --reader-streams of them for a streamed chat completion as long
as the context instead, and read none of the answer. A stream that is not read still costs the
model its generation until the daemon gives it up, as a read one would: those measure the
engine's share as much as the connections', so by default the readers only download.
Each attack socket is reopened a second after the daemon cuts it; the attack is a process of
its own (_abuse_attack.py). In each run, 8 workers send streamed chat completions back to back
(8 x --rounds), while the CLI's status calls (health, stats) are made every half second.
Reported: the legitimate requests and status calls served of those sent, TTFT p50 and its
ratio to the quiet run's (target within 1.5x), tokens/s, the attack sockets
the daemon cut, and the CPU the daemon's own process (which takes every connection; the model
runs in its worker) and the attack spent: on a machine with few cores the attack's own CPU
is taken from the model, which shows in tokens/s. With --runs N the whole is repeated N
times, each time with a quiet run of its own, and a last table tells, per attack, in how many
runs every request and status call was served with a TTFT p50 within 2x that quiet run's
(_abuse_report.py).

    python -m benchmarks.bench_abuse                          # writes docs/benchmarks.md
    python -m benchmarks.bench_abuse --runs 20 --spread 0     # #57's acceptance
    python -m benchmarks.bench_abuse --runs 2 --rounds 1 --no-write
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
from pathlib import Path

import aiohttp
import psutil

from benchmarks._abuse_report import HEADER, REPEAT_HEADER, REPEAT_TARGET, Run, repeat_rows, row
from benchmarks._common import (
    PROMPTS,
    REPO,
    Sample,
    cli,
    client_session,
    command,
    dated,
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
READY_TIMEOUT_S = 120.0
SETTLE_S = 2.0  # for the attack's reopening to reach its pace before the streams start
# The readers' download: far more than the ~80 KB a non-reader's window and the daemon's
# buffers take before its output is held back.
READER_FILE_BYTES = 2 << 20


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


async def upload_file(base: str, size: int) -> str:
    """A batch input file of about `size` bytes, stored by the daemon for the readers to ask
    for; its id."""
    ask = {"model": "smollm2", "messages": [{"role": "user", "content": "a" * 1000}]}
    line = {"method": "POST", "url": "/v1/chat/completions", "body": ask}
    lines = [json.dumps({"custom_id": f"r{i}", **line}) + "\n" for i in range(size // 1100)]
    form = aiohttp.FormData()
    form.add_field("purpose", "batch")
    form.add_field("file", "".join(lines).encode(), filename="readers.jsonl")
    async with client_session() as session:
        async with session.post(f"{base}/v1/files", data=form) as response:
            answer = await response.json()
            if response.status != 200:
                raise RuntimeError(f"the readers' file was refused: {answer}")
    return str(answer["id"])


def attacked(
    name: str,
    base: str,
    daemon: int,
    sources: list[str],
    counts: dict[str, int],
    args: argparse.Namespace,
) -> Run:
    """A run under attack: `counts` are the attack's sockets by mode (_abuse_attack.py)."""
    port = int(base.rsplit(":", 1)[1])
    cmd = [sys.executable, "-m", "benchmarks._abuse_attack", str(port)]
    cmd += [",".join(f"{mode}={n}" for mode, n in counts.items()), args.file_id, *sources]
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
        "--readers", type=int, default=256, help="attack sockets reading none of their answer"
    )
    p.add_argument(
        "--reader-streams",
        type=int,
        default=0,
        help="of the readers, those that ask for a streamed chat (the rest, a download)",
    )
    p.add_argument(
        "--spread",
        type=int,
        default=100,
        help="addresses (127.0.0.2 onwards) the spread run's attack comes from (0: no such run)",
    )
    p.add_argument(
        "--runs", type=int, default=1, help="times over, each with a quiet run of its own"
    )
    p.add_argument("--threads", type=int, default=len(os.sched_getaffinity(0)))
    p.add_argument("--no-write", action="store_true", help="do not update docs/benchmarks.md")
    args = p.parse_args(argv)
    if not 0 <= args.reader_streams <= args.readers:
        p.error("--reader-streams must be between 0 and --readers")
    return args


def attacks(args: argparse.Namespace) -> list[tuple[str, dict[str, int], list[str]]]:
    """Each attacked run: its name, its sockets by mode, and the addresses they come from."""
    origins = [("127.0.0.1", ["127.0.0.1"])]
    if args.spread:
        # Loopback is the whole of 127/8: 127.0.0.2, ..., 127.0.0.255, 127.0.1.0, ...
        spread = [f"127.0.{(i + 2) // 256}.{(i + 2) % 256}" for i in range(args.spread)]
        origins.append((f"{spread[0]}-{spread[-1]}", spread))
    downloads = args.readers - args.reader_streams
    kinds = [
        ("heads", {"idle": args.idle, "head": args.tricklers}),
        ("bodies", {"body": args.bodies}),
        ("readers", {"download": downloads, "stream": args.reader_streams}),
    ]
    return [
        (f"{kind} from {origin}", counts, sources)
        for (kind, counts), (origin, sources) in itertools.product(kinds, origins)
    ]


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    # The attack's sockets and the daemon's (it inherits this) must not run out of descriptors.
    allow_descriptors(args.idle + args.tricklers + args.bodies + args.readers + 1024)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    port = free_port()
    daemon = ["--model", "smollm2", "--parallel", str(STREAMS), "--ctx", "2048"]
    cmd = serve_command([*daemon, "--threads", str(args.threads)], port)
    print(f"{machine()}\n\n{HEADER}", flush=True)
    runs: list[Run] = []
    pairs: dict[str, list[tuple[Run, Run]]] = {}
    with tempfile.TemporaryDirectory(prefix="bench_abuse_") as tmp:
        # The readers' file, and the operator's token, in a state folder of this run's own
        # (this process's status calls read the token from it too).
        os.environ["XDG_STATE_HOME"] = tmp
        with running(cmd, port, "/health", Path(tmp) / "daemon.log") as base:
            asyncio.run(streams(base, 1, 8))  # warm-up: the model's first steps
            daemon_pid = int(get_json(f"{base}/api/admin/stats")["pid"])
            args.file_id = asyncio.run(upload_file(base, READER_FILE_BYTES))
            for n in range(args.runs):
                label = f"run {n + 1}: " if args.runs > 1 else ""
                quiet = asyncio.run(measured(f"{label}quiet", base, args, daemon_pid))
                runs.append(quiet)
                print(row(quiet, quiet), flush=True)
                for name, counts, sources in attacks(args):
                    run = attacked(f"{label}{name}", base, daemon_pid, sources, counts, args)
                    runs.append(run)
                    pairs.setdefault(name, []).append((run, quiet))
                    print(row(run, quiet), flush=True)
                    print(f"  attack saw: {json.dumps(run.attack)}", flush=True)
                    errors = {s.error for s in run.samples} | set(run.probes)
                    for error in sorted(e for e in errors if e):
                        print(f"  error: {error}", flush=True)
    summary = [REPEAT_HEADER, *repeat_rows(pairs)]
    print("\n" + "\n".join(summary), flush=True)
    if not args.no_write:
        write_doc(section(args, argv, daemon, runs, summary), START, END)
    return 0


def section(
    args: argparse.Namespace,
    argv: list[str],
    daemon: list[str],
    runs: list[Run],
    summary: list[str],
) -> str:
    """docs/benchmarks.md's section: every run's row, or with --runs, the summary over them."""
    quiet = runs[0]
    table = [HEADER, *(row(run, quiet) for run in runs)] if args.runs == 1 else summary
    streams_text = f", {args.reader_streams} of them a streamed chat" if args.reader_streams else ""
    return "\n".join(
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
            f"body a byte a second; readers: {args.readers} asking for a file of "
            f"{READER_FILE_BYTES >> 20} MiB{streams_text} and reading none of it; each "
            "reopened a second after the daemon cuts it.",
            *(
                [
                    f"- {args.runs} runs, each with a quiet run of its own; served: every "
                    "request and status call answered, the TTFT p50 within "
                    f"{REPEAT_TARGET:g}x its quiet run's."
                ]
                if args.runs > 1
                else []
            ),
            "",
            *table,
            END,
        ]
    )


if __name__ == "__main__":
    cli(main)
