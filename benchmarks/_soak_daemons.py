"""The daemons of a bench_soak.py run and what is read of them: their command, the processes
under each and their memory and CPU time (from /proc), their slots once traffic stops, their
prompt caches and model loads, and the lines of their logs at WARNING or above."""

from __future__ import annotations

import argparse
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from benchmarks._common import serve_command
from tests.support.daemons import TimedOut, load_counts, poll, resident

if TYPE_CHECKING:  # the workload reads the daemons' caches: only the type comes back
    from benchmarks._soak_workload import Request

CTX = 1024
FREE_TIMEOUT_S = 30.0


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
    if "localserve.engine.worker_process.main" in args:
        device = args[args.index("--device") + 1] if "--device" in args else "?"
        return f"worker {device}"
    return " ".join(Path(a).name for a in args[:3])


Memory = tuple[int, int]  # VmRSS, RssAnon (bytes)


def memory(pid: int) -> Memory | None:
    """A process's resident memory, and the anonymous part of it (what a leak grows; the
    rest is mapped files: the model's weights); None once it is gone."""
    try:
        fields = dict(
            line.split(":", 1)
            for line in Path(f"/proc/{pid}/status").read_text().splitlines()
            if ":" in line
        )
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
        return {
            name: {
                "slots": m["localserve"]["slots"],
                "free": m["localserve"]["slots"] - m["localserve"]["running"],
                "queued": m["localserve"]["queued"],
                "in_flight": m["localserve"]["in_flight"],
            }
            for name, m in resident(base).items()
        }

    def settled() -> dict[str, dict[str, int]] | None:
        slots = now()
        return slots if all_free(slots) else None

    try:
        return poll("every slot free", settled, FREE_TIMEOUT_S, interval_s=0.2)
    except TimedOut:
        return now()


def all_free(slots: dict[str, dict[str, int]]) -> bool:
    return bool(slots) and all(
        v["free"] == v["slots"] and not v["queued"] and not v["in_flight"] for v in slots.values()
    )


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
    warmup_errors: list[Request] = field(default_factory=list)  # its warm-up's failed requests


def daemon_cmd(
    port: int, refs: list[str], args: argparse.Namespace, budget: int | None
) -> list[str]:
    flags = [a for ref in refs for a in ("--model", ref)]
    flags += ["--parallel", str(args.parallel), "--ctx", str(CTX), "--threads", str(args.threads)]
    if budget is not None:
        flags += ["--memory-budget", str(budget)]
    return serve_command(flags, port)


LEVELS = ("WARNING", "ERROR", "CRITICAL", "Traceback")


def notable(log: Path) -> list[str]:
    """A daemon log's lines at WARNING or above (and tracebacks), from the level on."""
    out = []
    for line in log.read_text(errors="replace").splitlines():
        at = min((i for i in (line.find(f" {lv} ") for lv in LEVELS[:3]) if i >= 0), default=-1)
        if at >= 0 or line.startswith("Traceback"):
            out.append(line[at + 1 :] if at >= 0 else line)
    return out


def prompt_caches(base: str) -> tuple[int, int]:
    """What the resident models' prompt caches hold, and their limits, together: they fill as
    slots are reused, up to their limit, and their growth is RSS growth."""
    caches = [m["localserve"]["prompt_cache"] or {} for m in resident(base).values()]
    return sum(c.get("bytes", 0) for c in caches), sum(c.get("limit", 0) for c in caches)


def loads_total(base: str) -> int:
    return sum(load_counts(base).values())
