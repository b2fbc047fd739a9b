"""Hostile single requests (#57) next to an ordinary client: each input of the issue's list, sent
to a default SmolLM2 daemon while another client streams a chat, and whether any of them stalls
the event loop, takes long to answer or slows the other client.

Per case and round: the hostile requests go one after the other, each timed from the end of its
body's sending to the end of its answer (a raw connection, so that an answer that comes before
the body is all sent is seen too); an ordinary streamed chat starts as soon as the first body is
sent, and more follow until the hostile requests are answered. A separate process polls /health
every ~10 ms down its own connection (benchmarks/_hostile_probe.py): its longest wait during the
case is the event loop's longest stall, as the daemon exposes no loop-lag metric of its own.
Loads are read from /metrics before and after, for the reload cases.

Targets (the issue's): every hostile request answered (a 4xx, or a success) within 1 s; the
loop's longest stall at most 50 ms; the ordinary chat's TTFT (the median of the case's) at most
1.5x the quiet one, measured first.

    python -m benchmarks.bench_hostile                 # writes docs/benchmarks.md
    python -m benchmarks.bench_hostile --cases template,num-gpu-storm --rounds 1 --no-write
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shlex
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from benchmarks._common import (
    PROMPTS,
    REPO,
    Sample,
    cli,
    client_session,
    command,
    div,
    free_port,
    machine,
    publish,
    running,
    serve_command,
    stream_chat,
)
from benchmarks._hostile_inputs import CASES, MODEL, Case, Hostile

MARKERS = ("<!-- bench_hostile:start -->", "<!-- bench_hostile:end -->")
ANSWER_S = 1.0  # targets: each hostile request answered within this
STALL_S = 0.050  # the loop's longest stall at most this
TTFT_RATIO = 1.5  # the ordinary chat's TTFT at most this times quiet
POLL_S = 0.010
SETTLE_S = 0.5  # after each round: a stall that outlasts the answers still falls in the round
QUIET_CHATS = 5
MAX_TOKENS = 16
HEADER = (
    "| case | hostile status | answered in (s, worst) | loop stall (ms, worst) "
    "| ordinary TTFT (s, median) | vs quiet | ordinary served | model loads | target |\n"
    "|---|---|---:|---:|---:|---:|---:|---:|---|"
)


@dataclass
class Answer:
    status: str  # the HTTP status, or why there was none
    seconds: float  # from the end of the body's sending to the end of the answer
    text: str = ""  # the answer's body, its start: why a request was refused


@dataclass
class Outcome:
    case: Case
    answers: list[Answer] = field(default_factory=list)
    chats: list[Sample] = field(default_factory=list)
    windows: list[tuple[float, float]] = field(default_factory=list)  # monotonic, per round
    loads: int = 0


class Probe:
    """The /health poller's process, its polls gathered as they come: (start, latency)."""

    def __init__(self, port: int) -> None:
        cmd = [sys.executable, "-m", "benchmarks._hostile_probe", str(port), str(POLL_S)]
        self.proc = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.PIPE, text=True)
        assert self.proc.stdout is not None
        if self.proc.stdout.readline().strip() != "ready":
            raise RuntimeError("the /health probe did not start")
        self.polls: list[tuple[float, float]] = []
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            start, latency = (float(x) for x in line.split())
            self.polls.append((start, latency))

    def worst(self, t0: float, t1: float) -> float:
        """The longest poll that overlapped [t0, t1]."""
        return max((lat for s, lat in self.polls if s <= t1 and s + lat >= t0), default=0.0)

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.reader.join(timeout=5)


async def send(port: int, hostile: Hostile, timeout: float, sent_event: asyncio.Event) -> Answer:
    """One request down a fresh connection: its status and time, from the body's end (or from
    the answer, if it came first) to the answer's end. `sent_event` is set at the body's end."""
    head = (
        f"POST {hostile.path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
        f"Content-Type: {hostile.content_type}\r\nContent-Length: {len(hostile.body)}\r\n"
        "Connection: close\r\n\r\n"
    ).encode()
    reader, writer = await asyncio.open_connection("127.0.0.1", port, limit=1 << 20)
    sent: float | None = None

    async def write() -> None:
        nonlocal sent
        try:
            writer.write(head + hostile.body)
            await writer.drain()
        except ConnectionError:
            pass  # answered and closed before the body was all read
        sent = time.monotonic()
        sent_event.set()

    writing = asyncio.create_task(write())
    try:
        status_line = await asyncio.wait_for(reader.readline(), timeout)
        answered_at = time.monotonic()
        rest = await asyncio.wait_for(reader.read(), timeout)  # to the close
        end = time.monotonic()
    except asyncio.TimeoutError:
        return Answer(f"none in {timeout:g} s", timeout)
    except ConnectionError as exc:
        return Answer(type(exc).__name__, 0.0)
    finally:
        writing.cancel()
        sent_event.set()
        writer.close()
    parts = status_line.split()
    status = parts[1].decode() if len(parts) > 1 else "closed unanswered"
    text = rest.partition(b"\r\n\r\n")[2][:200].decode(errors="replace")
    took = end - min(sent if sent is not None else answered_at, answered_at)
    return Answer(status, took, text)


def loads(base: str) -> int:
    """The model's loads so far, from /metrics."""
    with urllib.request.urlopen(f"{base}/metrics", timeout=30) as r:
        text = r.read().decode()
    prefix = f'localserve_model_loads_total{{model="{MODEL}"}} '
    found = [line[len(prefix) :] for line in text.splitlines() if line.startswith(prefix)]
    return int(float(found[0])) if found else 0


async def chats_until(
    base: str, started: asyncio.Event, done: asyncio.Event, out: list[Sample]
) -> None:
    """Ordinary streamed chats, from the first hostile body's end until the hostile answers
    (at least one)."""
    await started.wait()
    async with client_session() as session:
        while True:
            prompt = PROMPTS[len(out) % len(PROMPTS)]
            out.append(await stream_chat(session, base, MODEL, prompt, MAX_TOKENS))
            if done.is_set():
                return


async def round_of(
    base: str, port: int, requests: list[Hostile], timeout: float, outcome: Outcome
) -> None:
    started, done = asyncio.Event(), asyncio.Event()
    chats = asyncio.create_task(chats_until(base, started, done, outcome.chats))
    try:
        for hostile in requests:
            # The ordinary chat starts once the first body is sent, not after its answer.
            outcome.answers.append(await send(port, hostile, timeout, started))
    finally:
        started.set()
        done.set()
        await chats


def run_case(case: Case, base: str, port: int, probe: Probe, args: argparse.Namespace) -> Outcome:
    outcome = Outcome(case)
    before = loads(base)
    for r in range(args.rounds):
        requests = case.build(r)  # before the window: building 16 MiB is the client's time
        t0 = time.monotonic()
        asyncio.run(round_of(base, port, requests, args.timeout, outcome))
        t1 = time.monotonic()
        time.sleep(SETTLE_S)
        outcome.windows.append((t0, t1 + SETTLE_S))
    outcome.loads = loads(base) - before
    return outcome


def quiet(base: str, probe: Probe | None) -> tuple[float, float]:
    """The quiet TTFT (median of a few chats one after the other) and /health's worst meanwhile
    (0 without a probe)."""

    async def chats() -> list[Sample]:
        async with client_session() as session:
            return [
                await stream_chat(session, base, MODEL, PROMPTS[i], MAX_TOKENS)
                for i in range(QUIET_CHATS)
            ]

    t0 = time.monotonic()
    samples = asyncio.run(chats())
    t1 = time.monotonic()
    time.sleep(SETTLE_S)
    ttfts = [s.ttft_s for s in samples if s.ttft_s is not None]
    if not ttfts:
        raise RuntimeError(f"no quiet chat was answered: {samples[0].error}")
    return statistics.median(ttfts), probe.worst(t0, t1 + SETTLE_S) if probe else 0.0


def statuses(answers: list[Answer]) -> str:
    counts = Counter(a.status for a in answers)
    return ", ".join(f"{s}" if n == 1 else f"{s} x{n}" for s, n in sorted(counts.items()))


def row(o: Outcome, probe: Probe, quiet_ttft: float) -> str:
    worst = max((a.seconds for a in o.answers), default=float("nan"))
    stall = max((probe.worst(t0, t1) for t0, t1 in o.windows), default=0.0)
    ok = [s for s in o.chats if s.error is None and s.ttft_s is not None]
    ttft = statistics.median(s.ttft_s for s in ok if s.ttft_s is not None) if ok else float("nan")
    missed = []
    answered = all(a.status[:1] in "24" and a.status.isdigit() for a in o.answers)
    if not answered or not worst <= ANSWER_S:
        missed.append("answer")
    if stall > STALL_S:
        missed.append("stall")
    if len(ok) < len(o.chats) or not ttft <= TTFT_RATIO * quiet_ttft:
        missed.append("TTFT")
    if o.case.max_loads is not None and o.loads > o.case.max_loads:
        missed.append(f"loads > {o.case.max_loads}")
    verdict = "met" if not missed else "missed: " + ", ".join(missed)
    return (
        f"| {o.case.name} | {statuses(o.answers)} | {worst:.3f} | {stall * 1000:.0f} | "
        f"{ttft:.3f} | {div(ttft, quiet_ttft)} | {len(ok)} of {len(o.chats)} | {o.loads} | "
        f"{verdict} |"
    )


def selected(names: str | None) -> list[Case]:
    if not names:
        return list(CASES)
    wanted = [n.strip() for n in names.split(",") if n.strip()]
    by_name = {c.name: c for c in CASES}
    unknown = [n for n in wanted if n not in by_name]
    if unknown:
        raise SystemExit(f"no such case: {', '.join(unknown)}; the cases: {', '.join(by_name)}")
    return [by_name[n] for n in wanted]


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--cases", help="comma-separated case names (default: all, in order)")
    p.add_argument("--rounds", type=int, default=3, help="times each case is sent")
    p.add_argument("--timeout", type=float, default=60.0, help="seconds a hostile request may take")
    p.add_argument("--threads", type=int, default=len(os.sched_getaffinity(0)))
    p.add_argument("--log", type=Path, help="keep the daemon's log here (default: not kept)")
    p.add_argument("--no-write", action="store_true", help="do not update docs/benchmarks.md")
    return p.parse_args(argv)


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    cases = selected(args.cases)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    port = free_port()
    daemon = ["--model", MODEL, "--threads", str(args.threads)]
    print(machine(), flush=True)
    with tempfile.TemporaryDirectory(prefix="bench_hostile_") as tmp:
        log = args.log or Path(tmp) / "daemon.log"
        with running(serve_command(daemon, port), port, "/health", log) as base:
            quiet(base, None)  # warm-up: the model's first steps
            probe = Probe(port)
            try:
                quiet_ttft, quiet_stall = quiet(base, probe)
                print(f"quiet: TTFT {quiet_ttft:.3f} s, /health worst {quiet_stall * 1000:.0f} ms")
                print(f"\n{HEADER}", flush=True)
                rows = []
                for case in cases:
                    outcome = run_case(case, base, port, probe, args)
                    rows.append(row(outcome, probe, quiet_ttft))
                    print(rows[-1], flush=True)
                    refusals = {(a.status, a.text) for a in outcome.answers if a.status[:1] != "2"}
                    for status, text in sorted(refusals):
                        print(f"  {status}: {text}", flush=True)
                    for error in sorted({s.error for s in outcome.chats if s.error}):
                        print(f"  ordinary chat: {error}", flush=True)
            finally:
                probe.stop()
    facts = [
        f"Command: `{shlex.join(command(__file__, argv))}`",
        f"Daemon: `{' '.join(daemon)}`, every bound at its default.",
        f"Each case {args.rounds} times; beside it, ordinary streamed chats of {MAX_TOKENS} "
        "tokens one after another, from the first hostile body's end to the last answer.",
        f"Quiet: TTFT {quiet_ttft:.3f} s (median of {QUIET_CHATS}), /health's worst wait "
        f"{quiet_stall * 1000:.0f} ms.",
        f"Loop stall: /health's longest wait, polled every {POLL_S * 1000:.0f} ms from a "
        "process of its own (the daemon exposes no loop-lag metric).",
        f"Targets: answered (4xx or 2xx) within {ANSWER_S:g} s, stall <= "
        f"{STALL_S * 1000:.0f} ms, ordinary TTFT <= {TTFT_RATIO:g}x quiet; the reload cases' "
        "loads as the issue bounds them.",
        *(f"{c.name}: {c.what}." for c in cases),
    ]
    title = "## Hostile requests next to an ordinary client (`bench_hostile.py`)"
    print()
    publish(MARKERS, title, facts, [HEADER, *rows], not args.no_write)
    return 0


if __name__ == "__main__":
    cli(main)
