"""Fixtures for the integration suite: real `localserve serve` daemons on free local ports.

`start_daemon(args)` is the generic helper: it starts `python -m localserve serve ARGS` on a
free 127.0.0.1 port, waits until GET /health answers 200, and returns the process and its base
URL. The session-scoped `daemon_url` fixture starts the one shared daemon most tests talk to.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator, Sequence

import pytest

HOST = "127.0.0.1"
MODEL = "smollm2"
PARALLEL = 16
CTX = 1024
STARTUP_TIMEOUT_S = 60.0
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


def free_port() -> int:
    """A port nothing listens on right now (the OS picks it; we release it for the daemon)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


def _log_text(log_path: str) -> str:
    try:
        with open(log_path, encoding="utf-8", errors="replace") as f:
            return f.read()
    except OSError as exc:
        return f"<could not read daemon log {log_path}: {exc}>"


def _health(url: str, timeout: float = 2.0) -> dict | None:
    """The /health body if it answers 200 with status ok, else None."""
    try:
        with urllib.request.urlopen(f"{url}/health", timeout=timeout) as r:
            if r.status != 200:
                return None
            body = json.loads(r.read())
    except (OSError, ValueError):  # refused, reset, timed out, not JSON yet
        return None
    return body if isinstance(body, dict) and body.get("status") == "ok" else None


def stop_daemon(proc: subprocess.Popen, grace_s: float = 15.0) -> None:
    """SIGTERM, wait for a clean exit, then SIGKILL whatever is left of this one process."""
    if proc.poll() is not None:
        return
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=10)


def start_daemon(
    args: Sequence[str] = DEFAULT_ARGS, timeout_s: float = STARTUP_TIMEOUT_S
) -> tuple[subprocess.Popen, str]:
    """Start `python -m localserve serve ARGS --host 127.0.0.1 --port <free>`; wait for /health.

    Returns (process, base URL). The daemon's stdout and stderr go to a temp file whose path is
    `proc.log_path`; if the daemon dies or never becomes healthy, the test fails with that log.
    """
    port = free_port()
    url = f"http://{HOST}:{port}"
    fd, log_path = tempfile.mkstemp(prefix=f"localserve-{port}-", suffix=".log")
    cmd = [sys.executable, "-m", "localserve", "serve", *args, "--host", HOST, "--port", str(port)]
    with os.fdopen(fd, "wb") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    proc.log_path = log_path  # type: ignore[attr-defined]
    deadline = time.monotonic() + timeout_s
    while True:
        if proc.poll() is not None:
            pytest.fail(
                f"daemon exited with code {proc.returncode} before becoming healthy\n"
                f"command: {' '.join(cmd)}\n--- daemon log ({log_path}) ---\n{_log_text(log_path)}",
                pytrace=False,
            )
        if _health(url) is not None:
            return proc, url
        if time.monotonic() > deadline:
            stop_daemon(proc)
            pytest.fail(
                f"daemon not healthy within {timeout_s:.0f} s\ncommand: {' '.join(cmd)}\n"
                f"--- daemon log ({log_path}) ---\n{_log_text(log_path)}",
                pytrace=False,
            )
        time.sleep(0.2)


@pytest.fixture(scope="session")
def daemon() -> Iterator[tuple[subprocess.Popen, str]]:
    """The one shared daemon: smollm2, 16 slots of 1024 tokens each."""
    proc, url = start_daemon(DEFAULT_ARGS)
    try:
        yield proc, url
    finally:
        stop_daemon(proc)
        if proc.returncode not in (0, -signal.SIGTERM):
            log = _log_text(proc.log_path)
            print(f"\n--- daemon exited with {proc.returncode}; log ---\n{log}")
        try:
            os.unlink(proc.log_path)
        except OSError:
            pass


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

    def start(args: Sequence[str], timeout_s: float = STARTUP_TIMEOUT_S):
        proc, url = start_daemon(args, timeout_s)
        started.append(proc)
        return proc, url

    yield start
    for proc in started:
        stop_daemon(proc)
        try:
            os.unlink(proc.log_path)
        except OSError:
            pass
