"""What the benchmark scripts share: starting and stopping servers, the streamed client and its
statistics, the doc section.

Each script runs its servers one at a time, in their own session, and stops them (SIGTERM,
then kill) however the run ends. Free ports, readiness polls, stopping and the JSON calls to a
daemon are the test suite's own (tests/support/daemons.py), so both start servers the same way.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

import aiohttp

from benchmarks._machine import machine

# free_port and serve_command are the scripts' too: their servers' ports and localserve's argv.
from tests.support.daemons import (  # noqa: F401
    NotReady,
    answers,
    free_port,
    serve_command,
    stop_daemon,
    wait_ready,
)

REPO = Path(__file__).resolve().parent.parent


def llama_server_command(
    binary: str, model: str, port: int, slots: int, ctx: int, threads: int, *extra: str
) -> list[str]:
    """llama.cpp's llama-server on loopback with `slots` slots of `ctx` tokens each, as
    localserve's --parallel and --ctx size them, and the same threads for decode and prefill."""
    return [
        *(binary, "-m", model, "--host", "127.0.0.1", "--port", str(port)),
        *("-np", str(slots), "-c", str(slots * ctx), "-t", str(threads), "-tb", str(threads)),
        *extra,
    ]


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


# --- client --------------------------------------------------------------------------


@dataclass
class Sample:
    """One streamed chat completion, as the client saw it."""

    model: str
    latency_s: float  # send to the end of the stream (or to the error)
    ttft_s: float | None  # send to the first content chunk; None if none came
    tokens: int
    error: str | None = None
    text: str = ""  # the answer's content, as streamed


class Results:
    """Figures over the successful samples of one timed run.

    Not a dataclass itself: each script's dataclass declares `wall_s` and `samples` in its own
    field order, which its positional constructor calls rely on."""

    wall_s: float
    samples: list[Sample]

    @property
    def ok(self) -> list[Sample]:
        return [s for s in self.samples if s.error is None]

    @property
    def tokens(self) -> int:
        return sum(s.tokens for s in self.ok)

    @property
    def tok_s(self) -> float:
        return self.tokens / self.wall_s if self.wall_s > 0 else 0.0

    def ttft(self, q: float) -> float:
        return percentile([s.ttft_s for s in self.ok if s.ttft_s is not None], q)

    def tpot(self, q: float) -> float:
        """Time per output token after the first: the decode speed a reader of the stream
        sees, apart from the prompt's time to first token."""
        return percentile(
            [
                (s.latency_s - s.ttft_s) / (s.tokens - 1)
                for s in self.ok
                if s.ttft_s is not None and s.tokens > 1
            ],
            q,
        )


def client_session() -> aiohttp.ClientSession:
    # Queued requests on a serial server can wait minutes; only a stalled read is an error.
    # No connection limit: the scripts' own worker counts set the concurrency. A connection
    # per request: llama.cpp's llama-server closes idle keep-alive connections under the
    # client, which then fails to write its next request ("Can not write request body").
    return aiohttp.ClientSession(
        timeout=aiohttp.ClientTimeout(total=None, sock_read=600),
        connector=aiohttp.TCPConnector(limit=0, force_close=True),
    )


async def stream_chat(
    session: aiohttp.ClientSession,
    base: str,
    model: str,
    prompt: str,
    max_tokens: int,
    arrivals: list[float] | None = None,
    messages: list[dict[str, str]] | None = None,
    extra: dict[str, Any] | None = None,
    headers: dict[str, str] | None = None,
) -> Sample:
    """A greedy streamed chat completion of `prompt`, or of a whole conversation's `messages`;
    failures come back as `Sample.error`, never raised, so one bad request does not end a timed
    run."""
    body = {
        "model": model,
        "messages": messages or [{"role": "user", "content": prompt}],
        "max_tokens": max_tokens,
        "temperature": 0,
        "stream": True,
        # llama_cpp.server ignores this field; then we fall back to counting content chunks.
        "stream_options": {"include_usage": True},
        **(extra or {}),
    }
    t0 = time.perf_counter()
    ttft: float | None = None
    chunks = 0
    usage_tokens: int | None = None
    parts: list[str] = []

    def done(error: str | None = None) -> Sample:
        tokens = usage_tokens if usage_tokens is not None else chunks
        return Sample(model, time.perf_counter() - t0, ttft, tokens, error, "".join(parts))

    try:
        async with session.post(base + "/v1/chat/completions", json=body, headers=headers) as r:
            if r.status != 200:
                return done(f"HTTP {r.status}: {(await r.text())[:200]}")
            async for raw in r.content:
                line = raw.strip()
                if not line.startswith(b"data:"):
                    continue  # blank separators and ": ping" comments
                data = line[5:].strip()
                if data == b"[DONE]":
                    break
                event = json.loads(data)
                if "error" in event:
                    return done(str(event["error"])[:200])
                if event.get("usage"):
                    usage_tokens = event["usage"].get("completion_tokens")
                for choice in event.get("choices") or []:
                    if content := (choice.get("delta") or {}).get("content"):
                        parts.append(content)
                        chunks += 1
                        if arrivals is not None:
                            arrivals.append(time.perf_counter())
                        if ttft is None:
                            ttft = time.perf_counter() - t0
    except (aiohttp.ClientError, asyncio.TimeoutError) as exc:
        return done(f"{type(exc).__name__}: {exc}")
    return done()


# --- servers -------------------------------------------------------------------------


def tail(path: Path, n: int = 30) -> str:
    return "\n".join(path.read_text(errors="replace").splitlines()[-n:])


# A localserve server run from another checkout (the code before a change, say) carries this
# suffix: "localserve@base". Its imports come from that tree, so old and new code are measured in
# one run, one server after the other.
BASE_SUFFIX = "@base"


def tree_env(tree: str, env: dict[str, str] | None = None) -> dict[str, str]:
    """`env` (default: ours) with localserve imported from `tree`: PYTHONPATH is searched
    before the editable install's finder."""
    out = dict(os.environ if env is None else env)
    out["PYTHONPATH"] = str(Path(tree).resolve())
    return out


@contextlib.contextmanager
def running(
    cmd: list[str], port: int, ready_path: str, log: Path, env: dict[str, str] | None = None
) -> Iterator[str]:
    """Start `cmd` (a server on 127.0.0.1:`port`), yield its base URL once `ready_path`
    answers 200, and stop it on the way out, whatever happened. `env`: None inherits ours."""
    with log.open("wb") as out:
        # Own session: a Ctrl-C in the terminal reaches only us, and we stop the server in order.
        proc = subprocess.Popen(
            cmd, stdout=out, stderr=subprocess.STDOUT, cwd=REPO, start_new_session=True, env=env
        )
    try:
        base = f"http://127.0.0.1:{port}"
        try:
            wait_ready(proc, lambda: answers(base + ready_path), cmd, str(log), READY_TIMEOUT_S)
        except NotReady as exc:
            what = (
                f"exited with {exc.returncode}"
                if exc.returncode is not None
                else f"not ready after {READY_TIMEOUT_S:.0f}s"
            )
            raise RuntimeError(f"server {what}:\n{tail(log)}") from None
        yield base
    finally:
        stop_daemon(proc)


def cpu_busy(seconds: float = 1.0) -> float:
    """The share of all CPUs busy over `seconds`, from /proc/stat (0.0 where it is missing)."""

    def sample() -> tuple[int, int]:
        fields = [int(x) for x in Path("/proc/stat").read_text().split("\n")[0].split()[1:]]
        return sum(fields), fields[3] + fields[4]  # total, idle + iowait

    try:
        total0, idle0 = sample()
        time.sleep(seconds)
        total1, idle1 = sample()
    except (OSError, ValueError, IndexError):
        return 0.0
    return 1 - (idle1 - idle0) / max(1, total1 - total0)


# --- reporting -----------------------------------------------------------------------


def command(script: str, argv: list[str]) -> list[str]:
    """How a doc section says its script was run: as a module of the benchmarks package."""
    return ["python", "-m", f"benchmarks.{Path(script).stem}", *argv]


def div(a: float, b: float) -> str:
    return f"{a / b:.2f}x" if b and b == b and a == a else "n/a"


def versions() -> str:
    from importlib.metadata import version

    return ", ".join(f"{p} {version(p)}" for p in ("localserve", "llama_cpp_python"))


def dated() -> list[str]:
    """A section's first facts: when it was measured, and the code it measured, so that a
    section left from long ago shows its age."""
    now = f"{dt.datetime.now(dt.timezone.utc):%Y-%m-%d %H:%M} UTC"
    return [f"- Date: {now}", f"- Code: {code_version()}"]


def code_version() -> str:
    """The commit of the tree these benchmarks run from, and whether it had changes."""
    git = ["git", "-C", str(REPO)]
    try:
        head = subprocess.run(
            [*git, "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=True
        ).stdout.strip()
        dirty = subprocess.run(
            [*git, "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown (not a git checkout)"
    return f"commit `{head}`" + (" with uncommitted changes" if dirty else "")


def publish(
    markers: tuple[str, str], title: str, facts: list[str], table: list[str], write: bool
) -> None:
    """A section of docs/benchmarks.md: its title, the date and machine, then `facts` (lines
    of the list under them) and `table`; printed, and written unless `write` is false."""
    start, end = markers
    section = "\n".join(
        [
            start,
            title,
            "",
            *dated(),
            f"- Machine: {machine()}",
            *(f"- {fact}" for fact in facts),
            "",
            *table,
            end,
        ]
    )
    print(section)
    if write:
        write_doc(section, start, end)


def stamped(text: str) -> str:
    """The section with the facts every record carries (date, commit, machine) after its
    heading, those it lacks added, so that no figure is read without its CPU."""
    facts = [*dated(), f"- Machine: {machine()}"]
    missing = [f for f in facts if f"\n{f.split(':')[0]}:" not in text]
    if not missing:
        return text
    lines = text.split("\n")
    at = next((i + 1 for i, line in enumerate(lines) if line.startswith("#")), 1)
    blank = [""] if at < len(lines) and lines[at] == "" else []
    return "\n".join([*lines[:at], *blank, *missing, *lines[at + len(blank) :]])


def write_doc(text: str, start: str, end: str) -> None:
    """Put `text` (which begins with `start` and ends with `end`) in docs/benchmarks.md,
    replacing the section between those markers if there is one; other sections stay."""
    if DOC.exists():
        doc = DOC.read_text()
    else:
        doc = (
            "# Benchmarks\n\nRun from the repository root with the bench extra installed "
            "(`pip install -e '.[bench]'`):\n\n"
            "```\npython -m benchmarks.bench_serving\npython -m benchmarks.bench_swap\n```\n\n"
            "Each run replaces its own section below; see `--help` for options.\n"
        )
    text = stamped(text)
    pattern = re.compile(re.escape(start) + r".*?" + re.escape(end), re.S)
    if pattern.search(doc):
        doc = pattern.sub(lambda _: text, doc)
    else:
        doc = doc.rstrip("\n") + "\n\n" + text
    DOC.parent.mkdir(parents=True, exist_ok=True)
    DOC.write_text(doc.rstrip("\n") + "\n")
    print(f"\nwrote {DOC.relative_to(REPO)}")


# --- entry point ---------------------------------------------------------------------


def cli(main: Callable[[list[str]], int]) -> NoReturn:
    """Run `main` on our arguments; a Ctrl-C ends quietly with the shell's usual 130."""
    try:
        sys.exit(main(sys.argv[1:]))
    except KeyboardInterrupt:
        sys.exit(130)
