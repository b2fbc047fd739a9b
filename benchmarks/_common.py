"""What the benchmark scripts share: starting and stopping servers, statistics, the doc section.

Each script runs its servers one at a time, in their own session, and stops them (SIGTERM,
then kill) however the run ends.
"""

from __future__ import annotations

import contextlib
import os
import platform
import re
import socket
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DOC = REPO / "docs" / "benchmarks.md"
READY_TIMEOUT_S = 180.0

# Open-ended asks, so greedy answers tend to run past --max-tokens instead of stopping early.
PROMPTS = [
    "Write a long story about a lighthouse keeper who finds a message in a bottle.",
    "Explain in detail how a car engine works, step by step.",
    "Write a long essay about the history of the printing press and its effects on society.",
    "Explain in detail how the internet routes a packet from one computer to another.",
    "Write a long story about a dragon who is afraid of heights.",
    "Describe in detail the water cycle and why it matters for life on Earth.",
    "Write a detailed guide to planting and caring for a vegetable garden.",
    "Explain in detail how vaccines train the immune system.",
    "Write a long story about two friends who get lost in a big city at night.",
    "Describe in detail a day in the life of a medieval blacksmith.",
    "Explain in detail how photosynthesis works in plants.",
    "Write a long letter from a sailor to his family describing a voyage across the ocean.",
    "Explain in detail how a computer compiles and runs a program.",
    "Write a long story about a robot who wants to learn how to paint.",
    "Describe in detail the causes and effects of the French Revolution.",
    "Write a detailed recipe for baking bread at home, explaining every step.",
    "Explain in detail how airplanes stay in the air.",
    "Write a long story about a village that wakes up to find the sea has disappeared.",
    "Describe in detail how to plan a two-week trip around Europe.",
    "Explain in detail how earthquakes happen and how buildings are made to survive them.",
]


def percentile(values: list[float], q: float) -> float:
    """Linear interpolation between closest ranks (numpy's default), without numpy."""
    if not values:
        return float("nan")
    xs = sorted(values)
    pos = (len(xs) - 1) * q
    lo = int(pos)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


# --- servers -------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_ready(proc: subprocess.Popen[bytes], url: str, log: Path) -> None:
    # No proxies: an http_proxy in the environment must not reroute polls of 127.0.0.1.
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    deadline = time.monotonic() + READY_TIMEOUT_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited with {proc.returncode}:\n{tail(log)}")
        with contextlib.suppress(OSError):
            with opener.open(url, timeout=2) as r:
                if r.status == 200:
                    return
        time.sleep(0.25)
    raise RuntimeError(f"server not ready after {READY_TIMEOUT_S:.0f}s:\n{tail(log)}")


def tail(path: Path, n: int = 30) -> str:
    return "\n".join(path.read_text(errors="replace").splitlines()[-n:])


def stop(proc: subprocess.Popen[bytes]) -> None:
    try:
        proc.terminate()
        proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        pass
    finally:
        # Also reached on a second Ctrl-C during the wait: never leave a server behind.
        if proc.poll() is None:
            proc.kill()
            proc.wait()


@contextlib.contextmanager
def running(cmd: list[str], port: int, ready_path: str, log: Path,
            env: dict[str, str] | None = None) -> Iterator[str]:
    """Start `cmd` (a server on 127.0.0.1:`port`), yield its base URL once `ready_path`
    answers 200, and stop it on the way out, whatever happened. `env`: None inherits ours."""
    with log.open("wb") as out:
        # Own session: a Ctrl-C in the terminal reaches only us, and we stop the server in order.
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, cwd=REPO,
                                start_new_session=True, env=env)
    try:
        base = f"http://127.0.0.1:{port}"
        wait_ready(proc, base + ready_path, log)
        yield base
    finally:
        stop(proc)


# --- reporting -----------------------------------------------------------------------


def div(a: float, b: float) -> str:
    return f"{a / b:.2f}x" if b and b == b and a == a else "n/a"


def machine() -> str:
    cpu = platform.processor() or "unknown CPU"
    with contextlib.suppress(OSError):
        m = re.search(r"^model name\s*:\s*(.+)$", Path("/proc/cpuinfo").read_text(), re.M)
        if m:
            cpu = m.group(1).strip()
    return f"{len(os.sched_getaffinity(0))} CPUs (nproc), {cpu}"


def versions() -> str:
    from importlib.metadata import version

    return ", ".join(f"{p} {version(p)}" for p in ("localserve", "llama_cpp_python"))


def write_doc(text: str, start: str, end: str) -> None:
    """Put `text` (which begins with `start` and ends with `end`) in docs/benchmarks.md,
    replacing the section between those markers if there is one; other sections stay."""
    if DOC.exists():
        doc = DOC.read_text()
    else:
        doc = ("# Benchmarks\n\nRun from the repository root with the bench extra installed "
               "(`pip install -e '.[bench]'`):\n\n"
               "```\npython benchmarks/bench_serving.py\npython benchmarks/bench_swap.py\n```\n\n"
               "Each run replaces its own section below; see `--help` for options.\n")
    pattern = re.compile(re.escape(start) + r".*?" + re.escape(end), re.S)
    if pattern.search(doc):
        doc = pattern.sub(lambda _: text, doc)
    else:
        doc = doc.rstrip("\n") + "\n\n" + text
    DOC.parent.mkdir(parents=True, exist_ok=True)
    DOC.write_text(doc.rstrip("\n") + "\n")
