"""Fixtures for the integration suite: real `localserve serve` daemons on free local ports.

`start_daemon(args)` is the generic helper: it starts `python -m localserve serve ARGS` on a
free 127.0.0.1 port (through daemons.py, which the benchmarks share), waits until GET /health
answers 200, and returns the process and its base URL. The session-scoped `daemon_url` fixture
starts the one shared daemon most tests talk to.
"""

from __future__ import annotations

import os
import signal
import subprocess
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

import pytest

import daemons
from daemons import HOST, STARTUP_TIMEOUT_S, free_port, log_text, stop_daemon  # noqa: F401

MODEL = "smollm2"
PARALLEL = 16
CTX = 1024
# Generous per-request timeout: the machine has 2 cores and may be shared with other work.
CLIENT_TIMEOUT_S = 120.0

# Hermetic by default: every daemon the suite starts keeps its models, config and logs in a
# temporary folder, never the developer's, and any pull that a test does not point at its own
# loopback hub fails at once instead of reaching the internet.
_SANDBOX = tempfile.mkdtemp(prefix="localserve-tests-")
os.environ["LOCALSERVE_MODELS"] = os.path.join(_SANDBOX, "models")
os.environ["XDG_CONFIG_HOME"] = os.path.join(_SANDBOX, "config")
os.environ["XDG_DATA_HOME"] = os.path.join(_SANDBOX, "data")
os.environ["XDG_STATE_HOME"] = os.path.join(_SANDBOX, "state")
os.environ["HF_ENDPOINT"] = "http://127.0.0.1:9"
os.environ.pop("LOCALSERVE_CATALOG", None)

DEFAULT_ARGS: tuple[str, ...] = (
    "--model", MODEL, "--parallel", str(PARALLEL), "--ctx", str(CTX),
)  # fmt: skip


def start_daemon(
    args: Sequence[str] = DEFAULT_ARGS, timeout_s: float = STARTUP_TIMEOUT_S,
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
def running_daemon(args: Sequence[str]) -> Iterator[tuple[subprocess.Popen, str]]:
    """A daemon for a fixture of wider scope than a test: started, yielded, stopped."""
    proc, url = start_daemon(args)
    try:
        yield proc, url
    finally:
        stop_daemon(proc)


@pytest.fixture(scope="session")
def daemon() -> Iterator[tuple[subprocess.Popen, str]]:
    """The one shared daemon: smollm2, 16 slots of 1024 tokens each."""
    proc, url = start_daemon(DEFAULT_ARGS)
    try:
        yield proc, url
    finally:
        stop_daemon(proc)
        if proc.returncode not in (0, -signal.SIGTERM):
            log = log_text(proc.log_path)
            print(f"\n--- daemon exited with {proc.returncode}; log ---\n{log}")
        daemons.discard(proc)


@pytest.fixture(scope="session")
def daemon_url(daemon: tuple[subprocess.Popen, str]) -> str:
    return daemon[1]


@pytest.fixture(scope="session")
def client(daemon_url: str):
    import openai

    c = openai.OpenAI(
        base_url=f"{daemon_url}/v1", api_key="none", timeout=CLIENT_TIMEOUT_S, max_retries=0
    )
    yield c
    c.close()


@pytest.fixture(scope="session")
def async_client_factory(daemon_url: str):
    """AsyncOpenAI clients are bound to the event loop they are used on: make one per loop."""
    import openai

    def make(**kwargs):
        kwargs.setdefault("timeout", CLIENT_TIMEOUT_S)
        kwargs.setdefault("max_retries", 0)
        return openai.AsyncOpenAI(base_url=f"{daemon_url}/v1", api_key="none", **kwargs)

    return make


@pytest.fixture
def daemon_factory() -> Iterator:
    """Start extra daemons with other arguments: `proc, url = daemon_factory([...args])`.

    Every daemon started through it is stopped when the test ends.
    """
    started: list[subprocess.Popen] = []

    def start(args: Sequence[str], timeout_s: float = STARTUP_TIMEOUT_S,
              env: dict[str, str] | None = None):
        proc, url = start_daemon(args, timeout_s, env)
        started.append(proc)
        return proc, url

    yield start
    for proc in started:
        daemons.discard(proc)
