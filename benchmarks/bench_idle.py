"""Idle cost: what a daemon takes while nobody asks it anything, its engine workers included.

Three states, each measured over --seconds after a settle: the daemon with no model loaded (no
worker runs yet), with smollm2 loaded (one CPU worker), and after that model's keep-alive has
unloaded it again (the worker stays, empty). Reported: the RSS of the daemon and of every
process under it, and their CPU time over the window as a share of one core. The issue's target
is < 1 % CPU and < 150 MB RSS in total with no model loaded.

    python -m benchmarks.bench_idle                  # writes docs/benchmarks.md
    python -m benchmarks.bench_idle --seconds 5 --no-write
"""

from __future__ import annotations

import argparse
import shlex
import tempfile
import time
from pathlib import Path

import psutil

from benchmarks._common import (
    cli,
    command,
    dated,
    free_port,
    machine,
    running,
    serve_command,
    write_doc,
)
from tests.support.daemons import get_json, post_json, resident

START, END = "<!-- bench_idle:start -->", "<!-- bench_idle:end -->"
HEADER = (
    "| state | processes | RSS total (MB) | CPU (% of one core) | target |\n"
    "|---|---:|---:|---:|---|"
)
MB = 1e6


def tree(pid: int) -> list[psutil.Process]:
    root = psutil.Process(pid)
    return [root, *root.children(recursive=True)]


def measure(pid: int, seconds: float) -> tuple[int, float, float]:
    """(processes, RSS total in bytes, CPU % of one core) of the daemon's process tree."""
    procs = tree(pid)
    before = {p.pid: sum(p.cpu_times()[:2]) for p in procs}
    time.sleep(seconds)
    procs = [p for p in tree(pid) if p.pid in before]
    used = sum(sum(p.cpu_times()[:2]) - before[p.pid] for p in procs)
    rss = sum(p.memory_info().rss for p in procs)
    return len(procs), rss, 100 * used / seconds


def row(state: str, n: int, rss: float, cpu: float, target: bool) -> str:
    verdict = ""
    if target:
        met = rss < 150 * MB and cpu < 1.0
        verdict = f"< 150 MB and < 1 %: {'met' if met else 'missed'}"
    return f"| {state} | {n} | {rss / MB:.0f} | {cpu:.2f} | {verdict} |"


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seconds", type=float, default=20.0, help="length of each window")
    p.add_argument("--no-write", action="store_true", help="do not update docs/benchmarks.md")
    args = p.parse_args(argv)
    port = free_port()
    cmd = serve_command(["--no-default-model", "--keep-alive", "3s"], port)
    rows: list[str] = []
    with tempfile.TemporaryDirectory(prefix="bench_idle_") as tmp:
        with running(cmd, port, "/health", Path(tmp) / "daemon.log") as base:
            pid = int(get_json(f"{base}/api/admin/stats")["pid"])
            time.sleep(2)
            rows.append(row("no model loaded", *measure(pid, args.seconds), target=True))
            print(rows[-1], flush=True)
            status, _ = post_json(f"{base}/api/admin/load", {"model": "smollm2", "keep_alive": -1})
            assert status == 200, status
            time.sleep(2)
            rows.append(row("smollm2 loaded, idle", *measure(pid, args.seconds), target=False))
            print(rows[-1], flush=True)
            post_json(f"{base}/api/admin/unload", {"model": "smollm2"})
            while resident(base):
                time.sleep(0.2)
            time.sleep(2)
            rows.append(row("unloaded again (worker kept)", *measure(pid, args.seconds), False))
            print(rows[-1], flush=True)
    if not args.no_write:
        section = "\n".join(
            [
                START,
                "## Idle cost (`bench_idle.py`)",
                "",
                *dated(),
                f"- Machine: {machine()}",
                f"- Command: `{shlex.join(command(__file__, argv))}`",
                f"- Each state: {args.seconds:g} s of nothing; RSS and CPU of the daemon and its "
                "engine workers together.",
                "",
                HEADER,
                *rows,
                END,
            ]
        )
        write_doc(section, START, END)
    return 0


if __name__ == "__main__":
    cli(main)
