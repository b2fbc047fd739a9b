"""bench_abuse.py's figures: a run's row, and over repeated runs (--runs), in how many of them
the ordinary client was served within REPEAT_TARGET times the quiet TTFT, per attack (#57's
acceptance: 20 of 20, for 256 non-readers and for 300 header-tricklers)."""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field

from benchmarks._common import Results, Sample, div

TARGET = 1.5  # a run's TTFT p50 under attack, at most this times the quiet one
REPEAT_TARGET = 2.0  # over repeated runs: each run's TTFT p50 within this of its quiet run's
HEADER = (
    "| run | requests served | TTFT p50 (s) | vs quiet | tok/s (vs quiet) | status calls served "
    "| attack sockets opened | cut: 408 / unanswered / 503 / unread | daemon CPU | attack CPU "
    "| target |\n"
    "|---|---:|---:|---:|---:|---:|---:|---|---:|---:|---|"
)
REPEAT_HEADER = (
    f"| attack | runs served within {REPEAT_TARGET:g}x quiet | TTFT p50 vs quiet: median / "
    "worst | requests served | status calls served | attack sockets cut |\n"
    "|---|---:|---:|---:|---:|---:|"
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

    def ratio(self, quiet: Run) -> float:
        """Its TTFT p50 over the quiet run's (infinite when none was served)."""
        ttft, base = self.ttft(0.5), quiet.ttft(0.5)
        return ttft / base if base and ttft == ttft and base == base else float("inf")

    def served(self, quiet: Run, target: float) -> bool:
        """Every request and status call served, and the TTFT p50 within `target` of quiet."""
        return (
            len(self.ok) == len(self.samples)
            and not any(self.probes)
            and self.ratio(quiet) <= target
        )


def row(run: Run, quiet: Run | None) -> str:
    ttft = run.ttft(0.5)
    ratio = div(ttft, quiet.ttft(0.5)) if quiet is not None and run is not quiet else ""
    tok_ratio = f" ({div(run.tok_s, quiet.tok_s)})" if quiet is not None and ratio else ""
    a = run.attack
    cut = " / ".join(str(a.get(k, 0)) for k in ("cut_408", "cut_unanswered", "cut_503"))
    cut += f" / {a.get('cut_unread', 0)}"
    verdict = ""
    if quiet is not None and run is not quiet:
        met = run.served(quiet, TARGET)
        verdict = f"all served, TTFT p50 <= {TARGET:g}x: {'met' if met else 'missed'}"
    return (
        f"| {run.name} | {len(run.ok)} of {len(run.samples)} | {ttft:.3f} | {ratio} | "
        f"{run.tok_s:.1f}{tok_ratio} | {run.probes.count(None)} of {len(run.probes)} | "
        f"{a.get('opened', '') if a else ''} | {cut if a else ''} | "
        f"{run.cpu.get('daemon', 0):.0f} % | {run.cpu.get('attack', 0):.0f} % | {verdict} |"
    )


def repeat_rows(pairs: dict[str, list[tuple[Run, Run]]]) -> list[str]:
    """A row per attack over its runs, each (the attacked run, the quiet run before it)."""
    rows = []
    for name, runs in pairs.items():
        ratios = [run.ratio(quiet) for run, quiet in runs]
        met = sum(run.served(quiet, REPEAT_TARGET) for run, quiet in runs)
        served = sum(len(run.ok) for run, _ in runs)
        sent = sum(len(run.samples) for run, _ in runs)
        probes = sum(run.probes.count(None) for run, _ in runs)
        asked = sum(len(run.probes) for run, _ in runs)
        cut = sum(n for run, _ in runs for k, n in run.attack.items() if k.startswith("cut_"))
        rows.append(
            f"| {name} | {met} of {len(runs)} | {statistics.median(ratios):.2f}x / "
            f"{max(ratios):.2f}x | {served} of {sent} | {probes} of {asked} | {cut} |"
        )
    return rows
