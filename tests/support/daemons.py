"""Real `localserve serve` daemons on free local ports, and the small JSON calls made to them.

Plain functions, no pytest: the test suite (through conftest.py) and the benchmarks (through
benchmarks/_common.py) both start, poll and stop their servers with these. A daemon that dies
or never becomes healthy raises `NotReady`, which carries its command and log; each caller
words the failure its own way.
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
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from typing import Any, TypeVar
from urllib.parse import urlsplit

HOST = "127.0.0.1"
STARTUP_TIMEOUT_S = 60.0
# No proxies: an http_proxy in the environment must not reroute calls to 127.0.0.1.
OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))

T = TypeVar("T")


class NotReady(RuntimeError):
    """A server that exited, or did not answer within its timeout, before it could serve."""

    def __init__(
        self, cmd: Sequence[str], log_path: str, returncode: int | None, timeout_s: float
    ) -> None:
        self.cmd = list(cmd)
        self.log_path = log_path
        self.returncode = returncode  # None: it was still running when we gave up
        self.timeout_s = timeout_s
        super().__init__(self.reason)

    @property
    def reason(self) -> str:
        if self.returncode is not None:
            return f"exited with code {self.returncode} before becoming healthy"
        return f"not healthy within {self.timeout_s:.0f} s"

    @property
    def log(self) -> str:
        return log_text(self.log_path)


class TimedOut(RuntimeError):
    """What `poll` waited for did not happen in time."""


def free_port() -> int:
    """A port nothing listens on right now (the OS picks it; we release it for the server)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


def log_text(log_path: str) -> str:
    try:
        with open(log_path, encoding="utf-8", errors="replace") as f:
            return f.read()
    except OSError as exc:
        return f"<could not read daemon log {log_path}: {exc}>"


def answers(url: str, timeout: float = 2.0) -> bool:
    """Whether GET url answers 200 (refused, reset or timed out: not yet)."""
    try:
        with OPENER.open(url, timeout=timeout) as r:
            return r.status == 200
    except OSError:
        return False


def health(url: str, timeout: float = 2.0) -> dict[str, Any] | None:
    """The daemon's /health body if it answers 200 with status ok, else None."""
    try:
        with OPENER.open(f"{url}/health", timeout=timeout) as r:
            if r.status != 200:
                return None
            body = json.loads(r.read())
    except (OSError, ValueError):  # refused, reset, timed out, not JSON yet
        return None
    return body if isinstance(body, dict) and body.get("status") == "ok" else None


def serve_command(args: Sequence[str], port: int) -> list[str]:
    """`python -m localserve serve ARGS` on 127.0.0.1:port, with this interpreter."""
    return [sys.executable, "-m", "localserve", "serve", *args, "--host", HOST, "--port", str(port)]


def wait_ready(
    proc: subprocess.Popen[bytes],
    ready: Callable[[], object],
    cmd: Sequence[str],
    log_path: str,
    timeout_s: float = STARTUP_TIMEOUT_S,
) -> None:
    """Poll `ready()` until it is truthy; raise NotReady if the server exits first or the
    timeout passes (then it is stopped, so nothing is left running)."""
    deadline = time.monotonic() + timeout_s
    while True:
        if proc.poll() is not None:
            raise NotReady(cmd, log_path, proc.returncode, timeout_s)
        if ready():
            return
        if time.monotonic() > deadline:
            stop_daemon(proc)
            raise NotReady(cmd, log_path, None, timeout_s)
        time.sleep(0.2)


def start_daemon(
    args: Sequence[str], timeout_s: float = STARTUP_TIMEOUT_S, env: dict[str, str] | None = None
) -> tuple[subprocess.Popen[bytes], str]:
    """Start `python -m localserve serve ARGS --host 127.0.0.1 --port <free>`; wait for /health.

    Returns (process, base URL). The daemon's stdout and stderr go to a temp file whose path is
    `proc.log_path`. `env` is added to ours for this daemon (and so its engine workers).
    """
    port = free_port()
    url = f"http://{HOST}:{port}"
    fd, log_path = tempfile.mkstemp(prefix=f"localserve-{port}-", suffix=".log")
    cmd = serve_command(args, port)
    with os.fdopen(fd, "wb") as log:
        proc = subprocess.Popen(
            cmd,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env={**os.environ, **env} if env else None,
        )
    proc.log_path = log_path  # type: ignore[attr-defined]
    wait_ready(proc, lambda: health(url) is not None, cmd, log_path, timeout_s)
    return proc, url


def stop_daemon(proc: subprocess.Popen[bytes], grace_s: float = 15.0) -> None:
    """SIGTERM, wait for a clean exit, then SIGKILL whatever is left of this one process."""
    try:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        pass
    finally:
        # Also reached on a second Ctrl-C during the wait: never leave a server behind.
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def discard(proc: subprocess.Popen[bytes]) -> None:
    """Stop a daemon from `start_daemon` and remove its log."""
    stop_daemon(proc)
    try:
        os.unlink(proc.log_path)  # type: ignore[attr-defined]
    except OSError:
        pass


# -- JSON over HTTP ------------------------------------------------------------------------------


def raw_request(
    url: str,
    method: str = "GET",
    body: bytes | None = None,
    content_type: str = "application/json",
    timeout: float = 30.0,
    headers: dict[str, str] | None = None,
) -> tuple[int, dict[str, str], Any]:
    """One plain HTTP request: (status, headers, JSON body or raw bytes if not JSON)."""
    headers = {**({"Content-Type": content_type} if body is not None else {}), **(headers or {})}
    req = urllib.request.Request(url, data=body, headers=headers, method=method)
    try:
        with OPENER.open(req, timeout=timeout) as r:
            status, hdrs, data = r.status, dict(r.headers), r.read()
    except urllib.error.HTTPError as e:
        status, hdrs, data = e.code, dict(e.headers), e.read()
    try:
        return status, hdrs, json.loads(data)
    except ValueError:
        return status, hdrs, data


def post_json(
    url: str, body: Any, timeout: float = 30.0, headers: dict[str, str] | None = None
) -> tuple[int, Any]:
    """POST a JSON body: (status, the answer's JSON), whatever the status."""
    status, _, data = raw_request(
        url, "POST", json.dumps(body).encode(), timeout=timeout, headers=headers
    )
    return status, data


def operator_headers(url: str) -> dict[str, str]:
    """What this user's CLI sends the daemon at `url`: its operator token, which the daemon left
    where only this user can read it (none, if it left none). A test or a benchmark that loads
    a model by file path acts as the operator: no other caller may."""
    from localserve.ground.places import operator_token_path
    from localserve.ground.settings import OPERATOR_HEADER

    try:
        token = operator_token_path(urlsplit(url).port or 80).read_text().strip()
    except OSError:
        return {}
    return {OPERATOR_HEADER: token}


def get_json(url: str, timeout: float = 30.0) -> Any:
    """GET a JSON answer that must come with 200."""
    status, _, body = raw_request(url, timeout=timeout)
    if status != 200:
        raise RuntimeError(f"GET {url} -> HTTP {status}: {body!r}")
    return body


def resident(url: str) -> dict[str, dict[str, Any]]:
    """GET /api/ps as {model name: entry}, without the `:latest` tag."""
    return {m["name"].partition(":")[0]: m for m in get_json(f"{url}/api/ps")["models"]}


def stats(url: str) -> dict[str, Any]:
    return get_json(f"{url}/api/admin/stats")


def load_counts(url: str) -> dict[str, int]:
    """Loads per model over the daemon's life, preloads included."""
    return stats(url)["load_counts"]


def reserved(url: str) -> dict[str, int]:
    """What the daemon's pools hold, by model: a model's memory stays here until it is freed."""
    held: dict[str, int] = {}
    for pool in stats(url)["pools"]:
        for name, size in pool["reserved"].items():
            held[name] = held.get(name, 0) + size
    return held


def poll(what: str, check: Callable[[], T], timeout_s: float, interval_s: float = 0.1) -> T:
    """Call check() until it returns something truthy, and return that; raise TimedOut naming
    `what` once the timeout has passed."""
    deadline = time.monotonic() + timeout_s
    while True:
        result = check()
        if result:
            return result
        if time.monotonic() > deadline:
            raise TimedOut(f"{what} did not happen within {timeout_s:.0f} s")
        time.sleep(interval_s)
