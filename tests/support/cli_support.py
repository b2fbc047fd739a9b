"""Running the real `localserve` command in tests: an isolated environment, and a guard that
stops any daemon a command started in the background."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import urlsplit

import psutil

from localserve.client import Client, ClientError

CLI_TIMEOUT_S = 180.0
# SmolLM2 sometimes rambles to the end of its context: one-shot answers in tests are bounded.
SHORT = ("-p", "num_predict=24")


def cli_env(home: Path, url: str) -> dict[str, str]:
    """The environment of a user with nothing configured, whose daemon lives at `url`: config,
    logs and models all in `home`, so nothing leaks into (or out of) the real ones."""
    parts = urlsplit(url)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LOCALSERVE_", "XDG_"))}
    for name in ("config", "state", "data", "cache"):
        (home / name).mkdir(parents=True, exist_ok=True)
        env[f"XDG_{name.upper()}_HOME"] = str(home / name)
    env.update(
        LOCALSERVE_CONFIG=str(home / "config" / "localserve.toml"),
        LOCALSERVE_MODELS=str(home / "models"),
        LOCALSERVE_HOST=parts.hostname or "127.0.0.1",
        LOCALSERVE_PORT=str(parts.port),
        # A daemon that `run` starts is sized like the suite's: quick to load on a busy machine.
        LOCALSERVE_PARALLEL="2",
        LOCALSERVE_CTX="1024",
        NO_COLOR="1",
        COLUMNS="200",
    )
    return env


def default_sigint() -> None:
    """A child's Ctrl-C as a user's terminal gives it. A test run started in the background
    (`cmd &` in a script) inherits SIGINT ignored, and Python then installs no KeyboardInterrupt
    handler: pass this as a spawned chat's `preexec_fn`."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def log_file(env: dict[str, str]) -> Path:
    return Path(env["XDG_STATE_HOME"]) / "localserve" / "log" / "server.log"


def localserve(
    *args: str, env: dict[str, str], stdin: str | None = None, timeout: float = CLI_TIMEOUT_S
) -> subprocess.CompletedProcess[str]:
    """`localserve ARGS` as a user runs it; stdin is empty unless given (never the test's)."""
    return subprocess.run(
        [sys.executable, "-m", "localserve", *args],
        input=stdin,
        stdin=subprocess.DEVNULL if stdin is None else None,
        capture_output=True,
        text=True,
        env=env,
        timeout=timeout,
    )


def daemon_pid(url: str) -> int | None:
    try:
        return int(Client(url).stats()["pid"])
    except (ClientError, KeyError, ValueError):
        return None


@contextmanager
def stops_daemon_at(url: str) -> Iterator[None]:
    """Whatever daemon ends up listening at `url` (started by the code under test) is stopped
    when the block ends: asked to shut down, then killed by pid if it lingers."""
    try:
        yield
    finally:
        pids = {p for p in [daemon_pid(url)] if p} | set(_serve_pids(url))
        try:
            Client(url).shutdown()
        except ClientError:
            pass
        for pid in pids:
            _wait_or_kill(pid)


def _serve_pids(url: str) -> list[int]:
    """`localserve serve ... --port N` processes for this test's own port (its own daemons)."""
    port = str(urlsplit(url).port)
    found = []
    for proc in psutil.process_iter(["pid", "cmdline"]):
        cmd: Sequence[str] = proc.info.get("cmdline") or []
        if "localserve" in cmd and "serve" in cmd and "--port" in cmd:
            after = list(cmd)[list(cmd).index("--port") + 1 :]
            if after and after[0] == port:
                found.append(proc.info["pid"])
    return found


def _wait_or_kill(pid: int, grace_s: float = 20.0) -> None:
    try:
        proc = psutil.Process(pid)
        proc.wait(timeout=grace_s)
    except psutil.NoSuchProcess:
        return
    except psutil.TimeoutExpired:
        os.kill(pid, signal.SIGKILL)
        time.sleep(0.5)
