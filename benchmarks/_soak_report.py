"""What a bench_soak.py run found, and how it is written up: its phases, the issue's figures
(errors, RSS drift, slots free, tokens/s late against early) and the tables of its section in
docs/benchmarks.md."""

from __future__ import annotations

import argparse
import platform
import shlex
from collections import Counter
from dataclasses import dataclass

from benchmarks._common import command, dated, machine, versions
from benchmarks._soak_daemons import CTX, LEVELS, Daemon, Memory, all_free
from benchmarks._soak_workload import CACHE_FULL, KINDS, Request, error_kind, series, tokens_in

START, END = "<!-- bench_soak:start -->", "<!-- bench_soak:end -->"
MiB = 1 << 20
DRIFT_LIMIT = 0.05
RATE_FLOOR = 0.95


def mib(n: int | None) -> str:
    return "n/a" if n is None else f"{n / MiB:.1f}"


def rss_rows(d: Daemon) -> list[tuple[str, str, int, Memory | None, Memory | None, float | None]]:
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

    @property
    def warmup_errors(self) -> list[Request]:
        return self.a.warmup_errors + self.b.warmup_errors

    def errors(self) -> Counter[str]:
        """Errors by kind, the warm-ups' included."""
        failed = [r for r in self.requests if r.error] + self.warmup_errors
        return Counter(error_kind(r.outcome) for r in failed)

    def window_s(self) -> float:
        return min(300.0, self.phases[0].t1 - self.phases[0].t0)

    def first_rate(self) -> float:
        first = self.phases[0]
        return tokens_in(first.reqs, first.t0, first.t0 + self.window_s()) / self.window_s()

    def last_rate(self) -> float:
        last = self.phases[-1]
        return tokens_in(last.reqs, last.t1 - self.window_s(), last.t1) / self.window_s()

    def drift(self, d: Daemon) -> float | None:
        """The largest RSS drift of a daemon's processes (None if one was not seen at both
        ends: it died or was started during the run)."""
        drifts = [row[5] for row in rss_rows(d)]
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
        drift_a, drift_b = self.drift(self.a), self.drift(self.b)
        first, last = self.first_rate(), self.last_rate()
        w = self.window_s()
        span = f"{w / 60:g} min" if w >= 60 else f"{w:.0f} s"
        return [
            (
                "errors (the warm-ups' included)",
                f"{sum(self.errors().values())} ({len(self.warmup_errors)} in the warm-ups)",
                not self.errors(),
            ),
            (
                "RSS drift after warm-up (daemon A, largest)",
                pct(drift_a),
                drift_a is not None and abs(drift_a) < DRIFT_LIMIT,
            ),
            (
                "RSS drift after warm-up (daemon B, swapping, largest)",
                pct(drift_b),
                drift_b is not None and abs(drift_b) < DRIFT_LIMIT,
            ),
            (
                "every slot free at the end",
                "yes" if all_free(self.a.slots) and all_free(self.b.slots) else "no",
                all_free(self.a.slots) and all_free(self.b.slots),
            ),
            (
                f"tok/s, last {span} / first {span} (daemon A)",
                f"{last:.1f} / {first:.1f} = {last / first if first else float('nan'):.2f}x",
                first > 0 and last >= RATE_FLOOR * first,
            ),
        ]


def tables(run: Run) -> list[str]:
    lines = ["| figure | value | target | met |", "|---|---:|---|---|"]
    targets = ("0", f"< {DRIFT_LIMIT:.0%}", f"< {DRIFT_LIMIT:.0%}", "yes", f">= {RATE_FLOOR:g}x")
    for (name, value, met), target in zip(run.figures(), targets):
        lines.append(f"| {name} | {value} | {target} | {'met' if met else 'missed'} |")
    lines.append(
        f"\nDaemon A's RSS drift, all its processes, less its prompt caches' growth: "
        f"{pct(run.a_drift_less_caches())}."
    )
    lines += [
        "",
        "| phase | daemon | requests | cut | errors | tok/s | tokens per CPU s | model loads |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for p in run.phases:
        lines.append(
            f"| {p.name} | {p.daemon.name} | {len(p.reqs)} | "
            f"{sum(r.outcome == 'cut' for r in p.reqs)} | {sum(r.error for r in p.reqs)} "
            f"| {p.tok_s:.1f} | {p.tok_per_cpu_s:.1f} "
            f"| {p.daemon.loads if p.daemon is run.b else '-'} |"
        )
    lines.append(f"\nModel loads on A during the run: {run.a.loads}.")
    for d in (run.a, run.b):
        lines.append(
            f"Daemon {d.name}'s prompt caches (MiB, after its warm-up, then after each "
            f"phase): {', '.join(mib(c) for c, _ in d.caches)}, of "
            f"{mib(d.caches[-1][1]) if d.caches else 'n/a'}."
        )
    for d in (run.a, run.b):
        counts = Counter(next((lv for lv in LEVELS if line.startswith(lv)), "?") for line in d.log)
        lines.append(
            f"Daemon {d.name}'s log: "
            + (", ".join(f"{n} {lv}" for lv, n in counts.items()) or "nothing at WARNING or above")
            + "."
        )
        for line, n in Counter(d.log).most_common(5):
            lines.append(f"    {n} x {line[:200]}")
    errors = run.errors()
    if errors:
        lines += ["", "| error | count | example |", "|---|---:|---|"]
        for kind, n in errors.most_common():
            example = next(
                r.outcome for r in run.requests if r.error and error_kind(r.outcome) == kind
            )
            lines.append(f"| {kind} | {n} | {example.replace('|', '/')[:120]} |")
    bucket = run.args.bucket_s
    lines += [
        "",
        f"Tokens/s over time (per {bucket:g} s):",
        "",
        "| phase | from (s) | tok/s |",
        "|---|---:|---:|",
    ]
    for p in run.phases:
        for start, rate in series(p.reqs, p.t0, p.t1, bucket):
            lines.append(f"| {p.name} | {start:.0f} | {rate:.1f} |")
    lines += [
        "",
        "| daemon | process | pid | RSS start (MiB) | RSS end (MiB) | drift "
        "| anon start (MiB) | anon end (MiB) |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for d in (run.a, run.b):
        for name, what, pid, a, b, drift in rss_rows(d):
            lines.append(
                f"| {name} | {what} | {pid} | {mib(a and a[0])} | {mib(b and b[0])} "
                f"| {pct(drift)} | {mib(a and a[1])} | {mib(b and b[1])} |"
            )
    lines += [
        "",
        "| daemon | model | slots | free at the end | queued | in flight |",
        "|---|---|---:|---:|---:|---:|",
    ]
    for d in (run.a, run.b):
        for model, s in d.slots.items():
            lines.append(
                f"| {d.name} | {model} | {s['slots']} | {s['free']} | {s['queued']} "
                f"| {s['in_flight']} |"
            )
    return lines


def section(run: Run, argv: list[str]) -> str:
    args = run.args
    return "\n".join(
        [
            START,
            "## Soak and churn (`bench_soak.py`)",
            "",
            *dated(),
            f"- Machine: {machine()}; CPUs {args.cpu_busy:.0%} busy before the run",
            f"- Versions: {versions()}, Python {platform.python_version()}",
            f"- Command: `{shlex.join(command('bench_soak', argv))}`",
            f"- {args.minutes:g} minutes in three phases after a {args.warmed_s:.0f} s warm-up "
            f"(at least {args.warmup:g} s, then until the prompt caches were "
            f"{CACHE_FULL:.0%} full, "
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
            "weights). B's processes are judged as A's, each time read with the larger model "
            "resident (one request to it first): its warm-up has already loaded each model once, "
            "so the swaps after it should need no more memory than the first ones. "
            "Slots free: /api/ps `slots` less `running`, with nothing queued or in flight.",
            "",
            *tables(run),
            END,
        ]
    )
