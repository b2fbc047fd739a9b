"""Starting a daemon in the background, for `run` and the tray when none answers: detached,
logging to a file, waited on. Beside client.py: both floor-5 faces (cli/, tray/) use it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from localserve.client import Client, DaemonUnreachable
from localserve.ground import places
from localserve.ground import settings as config

STARTUP_TIMEOUT_S = 90.0
# A daemon only starts itself here; a remote address is someone else's to start.
_LOCAL_HOSTS = {"127.0.0.1", "localhost", "::1", "0.0.0.0", "::", ""}
# Each daemon that `run` starts opens its part of the shared log with this line.
START_MARK = "--- started by `localserve"
# faulthandler's first line names the fatal signal; every thread's traceback follows it.
FATAL_MARK = "Fatal Python error"
_TAIL_BYTES = 256 * 1024


class DaemonDidNotStart(Exception):
    pass


def log_path() -> Path:
    """Where a daemon that `run` starts writes its log."""
    return places.log_dir() / "server.log"


def is_local(host: str) -> bool:
    return host in _LOCAL_HOSTS


def start(settings: config.Settings, log_path: Path, by: str = "run") -> subprocess.Popen[bytes]:
    log_path.parent.mkdir(parents=True, exist_ok=True)
    command = [
        sys.executable,
        "-m",
        "localserve",
        "serve",
        "--no-default-model",
        "--host",
        settings.host,
        "--port",
        str(settings.port),
    ]
    detach: dict[str, Any] = {}
    if os.name == "nt":
        # No console window, and out of the console's Ctrl-C group.
        detach["creationflags"] = (
            subprocess.DETACHED_PROCESS  # type: ignore[attr-defined]
            | subprocess.CREATE_NEW_PROCESS_GROUP  # type: ignore[attr-defined]
            | subprocess.CREATE_NO_WINDOW  # type: ignore[attr-defined]
        )
    else:
        # Its own session: the terminal's Ctrl-C and hang-up reach the chat, not the daemon.
        detach["start_new_session"] = True
    with open(log_path, "ab") as log:
        log.write(f"\n{START_MARK} {by}` at {time.ctime()} ---\n".encode())
        log.flush()
        return subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            close_fds=True,
            **detach,
        )


def wait_healthy(client: Client, process: subprocess.Popen[bytes], log_path: Path) -> None:
    deadline = time.monotonic() + STARTUP_TIMEOUT_S
    while True:
        if process.poll() is not None:
            raise DaemonDidNotStart(
                f"the daemon {ended(process.returncode)} while starting; "
                f"its log ({log_path}) ends with:\n{tail(log_path)}"
            )
        try:
            client.health(timeout=2.0)
            return
        except DaemonUnreachable:
            pass
        if time.monotonic() > deadline:
            raise DaemonDidNotStart(
                f"the daemon did not answer at {client.url} within {STARTUP_TIMEOUT_S:.0f} s "
                f"(pid {process.pid}); see its log: {log_path}"
            )
        time.sleep(0.2)


def ended(code: int) -> str:
    """How a process ended, from its exit status: `exited on signal SIGKILL`."""
    if code < 0:
        try:
            return f"exited on signal {signal.Signals(-code).name}"
        except ValueError:
            return f"exited on signal {-code}"
    # Windows reports a crash as an NTSTATUS code: 0xC0000005 is an access violation.
    return f"exited with code {code:#x}" if code > 255 else f"exited with code {code}"


def tail(path: Path, lines: int = 15) -> str:
    """The last lines of the latest daemon's log; a fatal error's first line is kept even
    when the tracebacks under it run longer than `lines`."""
    try:
        with open(path, "rb") as log:
            log.seek(max(log.seek(0, os.SEEK_END) - _TAIL_BYTES, 0))
            text = log.read().decode("utf-8", errors="replace")
    except OSError:
        return "(no log)"
    section = text.splitlines()
    starts = [i for i, line in enumerate(section) if line.startswith(START_MARK)]
    section = section[starts[-1] :] if starts else section
    shown = section[-lines:]
    fatal = next((line for line in section if line.startswith(FATAL_MARK)), None)
    if fatal is not None and fatal not in shown:
        shown = [fatal, "...", *shown]
    return "\n".join(shown)
