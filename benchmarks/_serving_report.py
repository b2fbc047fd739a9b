"""What bench_serving.py measures, and how it is written up: a concurrency level's record, its
table row, the ratios of localserve to each baseline, the metrics-on over metrics-off pairs, and
the sections of docs/benchmarks.md."""

from __future__ import annotations

import platform
import shlex
import statistics
from dataclasses import dataclass, field
from pathlib import Path

from benchmarks import _serving_servers
from benchmarks._common import Results, Sample, dated, machine, versions
from benchmarks._machine import KIND_NAMES, cpu_kind
from benchmarks._serving_servers import BASE, BASELINES, NO_METRICS

# --cold gets a section of its own.
COLD_START, COLD_END = "<!-- bench_serving_cold:start -->", "<!-- bench_serving_cold:end -->"
# A run against an earlier tree (--baseline-tree) alone is a record of a change, not of the
# server: it gets a section of its own, and never replaces a record against llama.cpp's server.
BASE_START, BASE_END = "<!-- bench_serving_base:start -->", "<!-- bench_serving_base:end -->"
BASE_TITLE = "## This tree against an earlier one (`bench_serving.py --baseline-tree`)"
METRICS_START, METRICS_END = (
    "<!-- bench_serving_metrics:start -->",
    "<!-- bench_serving_metrics:end -->",
)


def record_markers() -> tuple[str, str]:
    """The record against llama.cpp's server: one per CPU kind (benchmarks/_machine.py), since
    the kinds this project runs on pick different kernels."""
    kind = cpu_kind()
    return f"<!-- bench_serving:{kind}:start -->", f"<!-- bench_serving:{kind}:end -->"


@dataclass
class Level(Results):
    server: str
    concurrency: int
    wall_s: float
    samples: list[Sample] = field(default_factory=list)
    round: int = 0  # which pass over the servers (--alternate), from 0


HEADER = (
    "| server | concurrency | agg tok/s | TTFT p50 (ms) | TTFT p95 (ms) | TPOT p50 (ms) "
    "| requests | avg tokens | errors |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|"
)


def row(lv: Level) -> str:
    n = len(lv.samples)
    avg = lv.tokens / len(lv.ok) if lv.ok else 0.0
    name = f"{lv.server} #{lv.round + 1}" if lv.round else lv.server
    return (
        f"| {name} | {lv.concurrency} | {lv.tok_s:.1f} | {lv.ttft(0.5) * 1e3:.0f} "
        f"| {lv.ttft(0.95) * 1e3:.0f} | {lv.tpot(0.5) * 1e3:.2f} | {n} | {avg:.1f} "
        f"| {n - len(lv.ok)} |"
    )


def _median_ratio(pairs: list[tuple[float, float]]) -> str:
    ratios = [a / b for a, b in pairs if b and a == a and b == b]
    return f"{statistics.median(ratios):.2f}x" if ratios else "n/a"


def ratio_table(levels: list[Level], baseline: str, ours_name: str = "localserve") -> str:
    """Per concurrency, ours over the baseline: with --alternate, the median of each pass's
    ratio (the two ran minutes apart, so a pass's pair shares the machine's state)."""

    def runs(server: str, c: int) -> list[Level]:
        return [lv for lv in levels if lv.server == server and lv.concurrency == c]

    lines = [
        "| concurrency | tok/s ratio (higher is better) | TTFT p50 ratio (lower is better) "
        "| TTFT p95 ratio | TPOT p50 ratio (lower is better) |",
        "|---:|---:|---:|---:|---:|",
    ]
    for c in sorted({lv.concurrency for lv in levels}):
        pairs = list(zip(runs(ours_name, c), runs(baseline, c)))
        if not pairs:
            continue
        lines.append(
            f"| {c} | {_median_ratio([(o.tok_s, b.tok_s) for o, b in pairs])} | "
            f"{_median_ratio([(o.ttft(0.5), b.ttft(0.5)) for o, b in pairs])} | "
            f"{_median_ratio([(o.ttft(0.95), b.ttft(0.95)) for o, b in pairs])} | "
            f"{_median_ratio([(o.tpot(0.5), b.tpot(0.5)) for o, b in pairs])} |"
        )
    return "\n".join(lines) if len(lines) > 2 else ""


def ratio_pairs() -> list[tuple[str, str]]:
    """localserve against every baseline; the baseline tree's localserve against the C++
    server too, so both ratios to llama-server come from one run."""
    return [("localserve", b) for b in BASELINES] + [(BASE, "llama-server")]


def section(
    levels: list[Level],
    argv: list[str],
    model_path: str,
    cold: bool,
    markers: tuple[str, str],
    title: str = "",
) -> str:
    parts = [
        markers[0],
        title
        or (
            "## Serving with cold prompts (`bench_serving.py --cold`)"
            if cold
            else f"## Serving on {KIND_NAMES[cpu_kind()]} (`bench_serving.py`)"
        ),
        "",
        *dated(),
        f"- Machine: {machine()}",
        f"- Versions: {versions()}, Python {platform.python_version()}",
        f"- Model: `{Path(model_path).name}`",
        f"- Command: `{shlex.join(argv)}`",
        *(
            [f"- llama.cpp's server: `{_serving_servers.LLAMA_SERVER_BIN}`"]
            if any(lv.server == "llama-server" for lv in levels)
            else []
        ),
        *(
            [f"- {BASE}: localserve imported from `{_serving_servers.BASELINE_TREE}`"]
            if any(lv.server == BASE for lv in levels)
            else []
        ),
        "",
        "Streamed chat completions, greedy. *agg tok/s* is all completion tokens of a level "
        "over its wall time; TTFT is send to first content chunk; TPOT is the time per "
        "token after the first, (end - TTFT) / (tokens - 1), per request; *avg tokens* shows "
        "how close answers came to `--max-tokens` (early EOS makes them shorter).",
        *(
            [
                "",
                f"The servers ran in turn, {passes} passes (`#2` is a server's second), the "
                "order reversed every other pass, so that none always went first; each ratio "
                "below is the median of the passes' ratios.",
            ]
            if (passes := 1 + max((lv.round for lv in levels), default=0)) > 1
            else []
        ),
        "",
        HEADER,
        *(row(lv) for lv in levels),
    ]
    for ours, baseline in ratio_pairs():
        ratios = ratio_table(levels, baseline, ours)
        if ratios:
            parts += ["", f"{ours} / {baseline}:", "", ratios]
    return "\n".join(parts + [markers[1]])


def overhead_ratios(levels: list[Level]) -> dict[int, list[float]]:
    """Per concurrency, each metrics-on run's tok/s over the metrics-off run just before it:
    pairs cancel the machine's drift, which medians of each side alone do not."""
    ratios: dict[int, list[float]] = {}
    for c in sorted({lv.concurrency for lv in levels}):
        off = [lv for lv in levels if lv.server == NO_METRICS and lv.concurrency == c]
        on = [lv for lv in levels if lv.server == "localserve" and lv.concurrency == c]
        ratios[c] = [a.tok_s / b.tok_s for a, b in zip(on, off) if b.tok_s]
    return ratios
