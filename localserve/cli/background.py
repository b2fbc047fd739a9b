"""Starting the daemon for `run` when none answers: detached, logging to a file, waited on."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from localserve.ground import settings as config
from localserve.cli.output import note, spinner
from localserve.client import Client, DaemonUnreachable

STARTUP_TIMEOUT_S = 90.0
# A daemon only starts itself here; a remote address is someone else's to start.
_LOCAL_HOSTS = {"127.0.0.1", "localhost", "::1", "0.0.0.0", "::", ""}


class DaemonDidNotStart(Exception):
    pass


def ensure_daemon(client: Client, settings: config.Settings) -> None:
    """Return once a daemon answers at the configured address, starting one if need be."""
    try:
        client.health()
        return
    except DaemonUnreachable:
        if settings.host not in _LOCAL_HOSTS:
            raise
    log_path = config.log_dir() / "server.log"
    with spinner(f"Starting localserve at {settings.url} (log: {log_path})"):
        process = start(settings, log_path)
        _wait_healthy(client, process, log_path)
    note(
        f"localserve is now running in the background at {settings.url} "
        f"(log: {log_path}); `localserve shutdown` stops it"
    )


def start(settings: config.Settings, log_path: Path) -> subprocess.Popen[bytes]:
    log_path.parent.mkdir(parents=True, exist_ok=True)
    command = [
        sys.executable, "-m", "localserve", "serve", "--no-default-model",
        "--host", settings.host, "--port", str(settings.port),
    ]  # fmt: skip
    detach: dict[str, object] = {}
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
        log.write(f"\n--- started by `localserve run` at {time.ctime()} ---\n".encode())
        log.flush()
        return subprocess.Popen(
            command, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
            close_fds=True, **detach,  # type: ignore[arg-type]
        )  # fmt: skip


def _wait_healthy(client: Client, process: subprocess.Popen[bytes], log_path: Path) -> None:
    deadline = time.monotonic() + STARTUP_TIMEOUT_S
    while True:
        if process.poll() is not None:
            raise DaemonDidNotStart(
                f"the daemon exited with code {process.returncode} while starting; "
                f"its log ({log_path}) ends with:\n{_tail(log_path)}"
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


def _tail(path: Path, lines: int = 15) -> str:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return "(no log)"
    return "\n".join(text.splitlines()[-lines:])
