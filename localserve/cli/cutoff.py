"""When an answer stops short: say why, where the daemon's log is, and whether the daemon is
gone, and of what it died when this `run` started it.

An engine that crashes takes the daemon with it, and the answer's stream just ends; saying
nothing there would read as an empty but successful answer.
"""

from __future__ import annotations

import subprocess
import time
from urllib.parse import urlsplit

from localserve.cli import output
from localserve.client import Client, ClientError, DaemonUnreachable, StreamCutOff
from localserve.launcher import ended, is_local, log_path, tail

# A daemon that died closes its sockets as it ends: its exit status follows within a moment.
EXIT_GRACE_S = 3.0
TAIL_LINES = 12


class Daemon:
    """The daemon an answer came from: its client, and the process when this run started it."""

    def __init__(self, client: Client, process: subprocess.Popen[bytes] | None = None) -> None:
        self.client = client
        self.process = process
        self.host = urlsplit(client.url).hostname or ""

    def report(self, exc: StreamCutOff | DaemonUnreachable) -> bool:
        """Print what happened on stderr; True when the daemon still answers (a chat may go
        on), False when it is gone."""
        alive = self._answers()
        output.error(f"{exc}{self.log_hint()}")
        if alive:
            return True
        status = self._exit_status()
        gone = f"the daemon at {self.client.url} no longer answers"
        if status is not None:
            output.stderr.print(f"{status}; its log ends with:", markup=False)
            output.stderr.print(tail(log_path(), TAIL_LINES), markup=False)
        elif self.process is not None:
            output.stderr.print(f"{gone} (pid {self.process.pid} still runs)", markup=False)
        elif isinstance(exc, StreamCutOff):  # "cannot reach the daemon" says it already
            output.stderr.print(gone, markup=False)
        return False

    def _answers(self) -> bool:
        """Whether /health answers; for a daemon of our own, wait a moment for its exit
        status, which names the signal that killed it."""
        deadline = time.monotonic() + EXIT_GRACE_S
        while True:
            try:
                self.client.health(timeout=2.0)
                return True
            except ClientError:
                pass
            if self.process is None or self.process.poll() is not None:
                return False
            if time.monotonic() > deadline:
                return False
            time.sleep(0.1)

    def _exit_status(self) -> str | None:
        """How our daemon ended, in words: `the daemon exited on signal SIGKILL`."""
        if self.process is None or self.process.poll() is None:
            return None
        return f"the daemon {ended(self.process.returncode)}"

    def log_hint(self) -> str:
        """` (see the log: PATH)` where the daemon's log can be found on this machine."""
        path = log_path()
        if self.process is not None or (is_local(self.host) and path.exists()):
            return f" (see the log: {path})"
        return ""
