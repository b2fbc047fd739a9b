"""The suite's fixtures: the one shared daemon most live tests talk to (`daemon_url`, SmolLM2
with 16 slots of 1024 tokens), the official clients pointed at it, and `daemon_factory` for
daemons of a test's own (tests/support/live.py starts them).

tests/unit/ holds the tests that need no daemon and run in seconds, mirroring the package
tree; tests/live/ the daemon, client and browser tests, marked `live` here. Every daemon keeps
its models, config and logs in a temporary folder, never the developer's.
"""

from __future__ import annotations

import os
import signal
import subprocess
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from tests.support import daemons, hermetic, in_process
from tests.support.daemons import STARTUP_TIMEOUT_S, log_text, stop_daemon
from tests.support.live import CLIENT_TIMEOUT_S, DEFAULT_ARGS, start_daemon

# Hermetic by default: no setting from the developer's shell (LOCALSERVE_PORT, an API key, a
# config file) reaches a daemon or CLI the suite starts; every daemon keeps its models, config
# and logs in a temporary folder, never the developer's; and any pull that a test does not
# point at its own loopback hub fails at once instead of reaching the internet.
hermetic.clear_settings(os.environ)
# A test marked `kernels` runs in a pytest of its own (tests/support/isolated.py), which shares
# this one's sandbox: the same models, and the probe's same verdicts.
_SANDBOX = os.environ.get("LOCALSERVE_TEST_SANDBOX") or tempfile.mkdtemp(prefix="localserve-tests-")
os.environ["LOCALSERVE_TEST_SANDBOX"] = _SANDBOX
os.environ["LOCALSERVE_MODELS"] = os.path.join(_SANDBOX, "models")
os.environ["XDG_CONFIG_HOME"] = os.path.join(_SANDBOX, "config")
os.environ["XDG_DATA_HOME"] = os.path.join(_SANDBOX, "data")
os.environ["XDG_STATE_HOME"] = os.path.join(_SANDBOX, "state")
os.environ["HF_ENDPOINT"] = "http://127.0.0.1:9"
# On a CPU with AMX, every daemon would start the probe's remedy, a build of minutes, beside the
# suite; tests/live/test_native_remedy.py turns it on where it tests it.
os.environ["LOCALSERVE_NO_NATIVE_BUILD"] = "1"

LIVE = Path(__file__).parent / "live"
# A test marked `kernels` runs llama.cpp in its own process, so that a native crash fails that
# test alone.
pytest_plugins = ("tests.support.isolated",)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Tests under tests/live/ run daemons, clients or a browser: `-m "not live"` leaves them."""
    for item in items:
        if LIVE in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.live)


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--probe-saw-sigill",
        action="store_true",
        help="run as on a host whose probe saw llama.cpp's AMX kernels die: every load, in a "
        "daemon or in-process, goes without extra buffer types",
    )


def pytest_configure(config: pytest.Config) -> None:
    if config.getoption("--probe-saw-sigill"):
        in_process.force_sigill_verdict()


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

    def start(
        args: Sequence[str], timeout_s: float = STARTUP_TIMEOUT_S, env: dict[str, str] | None = None
    ):
        proc, url = start_daemon(args, timeout_s, env)
        started.append(proc)
        return proc, url

    yield start
    for proc in started:
        daemons.discard(proc)
