"""Real daemons for the live tests: `start_daemon(args)` starts `python -m localserve serve
ARGS` on a free 127.0.0.1 port (through daemons.py, which the benchmarks share), waits until
GET /health answers 200, and returns the process and its base URL; a daemon that dies or never
becomes healthy fails the test with its command and log. `running_daemon` is the same as a
context manager, for fixtures wider than a test.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

import pytest

from tests.support import daemons
from tests.support.daemons import STARTUP_TIMEOUT_S, stop_daemon
from tests.support.helpers import MODEL

PARALLEL = 16
CTX = 1024
# Generous per-request timeout: the machine has 2 cores and may be shared with other work.
CLIENT_TIMEOUT_S = 120.0

DEFAULT_ARGS: tuple[str, ...] = (
    "--model",
    MODEL,
    "--parallel",
    str(PARALLEL),
    "--ctx",
    str(CTX),
)


def start_daemon(
    args: Sequence[str] = DEFAULT_ARGS,
    timeout_s: float = STARTUP_TIMEOUT_S,
    env: dict[str, str] | None = None,
) -> tuple[subprocess.Popen, str]:
    """`daemons.start_daemon`, failing the test with the daemon's command and log if it dies or
    never becomes healthy. Returns (process, base URL); the log's path is `proc.log_path`."""
    try:
        return daemons.start_daemon(args, timeout_s, env)
    except daemons.NotReady as exc:
        pytest.fail(
            f"daemon {exc.reason}\ncommand: {' '.join(exc.cmd)}\n"
            f"--- daemon log ({exc.log_path}) ---\n{exc.log}",
            pytrace=False,
        )


@contextmanager
def running_daemon(
    args: Sequence[str], env: dict[str, str] | None = None
) -> Iterator[tuple[subprocess.Popen, str]]:
    """A daemon for a fixture of wider scope than a test: started, yielded, stopped. `env` is
    added to ours for it."""
    proc, url = start_daemon(args, env=env)
    try:
        yield proc, url
    finally:
        stop_daemon(proc)
