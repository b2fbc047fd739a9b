"""A real Claude Code session kept warm (#44): four turns through the real CLI (`claude -p`,
then `claude -p --continue`), configured by what `localserve launch claude --print` prints, on a
daemon with default settings but its model (Gemma 3 270M served from a file, its context fitted)
and an answer cap of ANSWER tokens (`--max-output` to the agent, `--max-tokens` to the daemon).

Turn 1's main request is its cold one (least cached); each later turn's is the largest prompt
among the /v1/messages requests the turn made;
its prompt tokens, cached tokens and time to first token come from the daemon's request log.
Targets: every later turn >= 90% cached, and its TTFT <= 0.1x turn 1's.

    python -m benchmarks.bench_agent_session               # writes docs/benchmarks.md
    python -m benchmarks.bench_agent_session --no-write
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path

from benchmarks._common import cli, command, free_port, publish, running, serve_command
from tests.support.agent_clis import agent
from tests.support.residency_support import gemma_file

MARKERS = ("<!-- bench_agent_session:start -->", "<!-- bench_agent_session:end -->")
ASKS = [
    "Say hi.",
    "What is 2 + 2?",
    "Name a colour.",
    "Say goodbye.",
]
LOGGED = re.compile(r"/v1/messages \S+ 200 prompt=(\d+) cached=(\d+) generated=\d+ ttft=([\d.]+)s")
TURN_TIMEOUT_S = 900
# Each answer's cap: a 270M model left alone writes until its context is full.
ANSWER = 64


def launch_print(port: int, env: dict[str, str]) -> tuple[dict[str, str], list[str]]:
    done = subprocess.run(
        [sys.executable, "-m", "localserve", "launch", "claude", "--model", "gemma3"]
        + ["--port", str(port), "--max-output", str(ANSWER), "--print"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
        timeout=300,
    )
    *exports, line = done.stdout.strip().splitlines()
    pairs = (e.removeprefix("export ").partition("=") for e in exports)
    return {name: shlex.split(value)[0] for name, _, value in pairs}, shlex.split(line)


def turn_requests(log: Path, seen: int) -> tuple[list[tuple[int, int, float]], int]:
    """The /v1/messages requests logged since line `seen`: (prompt, cached, ttft) each."""
    lines = log.read_text(encoding="utf-8", errors="replace").splitlines()
    found = [m for line in lines[seen:] if (m := LOGGED.search(line))]
    return [(int(m[1]), int(m[2]), float(m[3])) for m in found], len(lines)


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--no-write", action="store_true", help="do not update docs/benchmarks.md")
    args = p.parse_args(argv)
    claude = agent("claude")
    if claude is None:
        sys.exit("Claude Code could not be installed from the npm registry")
    with tempfile.TemporaryDirectory(prefix="bench-agent-session-") as tmp:
        home = Path(tmp)
        env = {
            **os.environ,
            **{f"XDG_{k}_HOME": str(home / k.lower()) for k in ("CONFIG", "DATA", "STATE")},
            "LOCALSERVE_MODELS": str(home / "models"),
        }
        linked = home / "gemma3.gguf"
        linked.symlink_to(gemma_file())
        port = free_port()
        log = home / "daemon.log"
        cmd = serve_command(["--model", str(linked), "--max-tokens", str(ANSWER)], port)
        rows: list[tuple[int, int, float]] = []
        with running(cmd, port, "/health", log, env):
            agent_env, launched = launch_print(port, env)
            seen = 0
            for turn, ask in enumerate(ASKS, 1):
                more = ["-p", ask] if turn == 1 else ["-p", "--continue", ask]
                subprocess.run(
                    [str(claude), *more, *launched[1:]],
                    env={**env, "HOME": str(home), **agent_env},
                    cwd=home,
                    capture_output=True,
                    timeout=TURN_TIMEOUT_S,
                )
                requests, seen = turn_requests(log, seen)
                if not requests:
                    sys.exit(f"turn {turn} made no request the daemon answered:\n{log.read_text()}")
                # Turn 1: its cold request (the prefill every later turn should skip); later
                # turns: the largest prompt (the conversation so far).
                cold = min(requests, key=lambda r: r[1] / r[0])
                rows.append(cold if turn == 1 else max(requests))
                print(f"turn {turn}: prompt, cached, ttft = {rows[-1]}", flush=True)
    first_ttft = rows[0][2]
    table = [
        "| turn | prompt tokens | cached tokens | cached | TTFT (s) | TTFT vs turn 1 |",
        "|---:|---:|---:|---:|---:|---:|",
        *(
            f"| {i} | {prompt:,} | {cached:,} | {cached / prompt:.1%} | {ttft:.2f} | "
            f"{ttft / first_ttft:.3f}x |"
            for i, (prompt, cached, ttft) in enumerate(rows, 1)
        ),
    ]
    later = rows[1:]
    facts = [
        f"Command: `{' '.join(command(__file__, argv))}`",
        "Claude Code 2.1.332 (`claude -p`, then `-p --continue`), configured by `localserve "
        "launch claude --print`; a daemon with default settings serving Gemma 3 270M from a "
        "file (context fitted), answers capped at 64 tokens. Turn 1: its cold request; later "
        "turns: the largest /v1/messages request, from the daemon's log.",
        f"Later turns cached: min {min(c / p for p, c, _ in later):.1%} (target >= 90%); TTFT "
        f"max {max(t for _, _, t in later) / first_ttft:.3f}x turn 1's (target <= 0.1x).",
    ]
    title = "## A real Claude Code session kept warm (`bench_agent_session.py`)"
    publish(MARKERS, title, facts, table, not args.no_write)
    return 0


if __name__ == "__main__":
    cli(main)
