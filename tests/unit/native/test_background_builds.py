"""The runner of a build in the daemon's background (native/wheels.py's Builds): the daemon's
shutdown ends the build, the processes pip started included. Real processes: a shell that
starts a child of its own stands for pip and its compiler."""

from __future__ import annotations

import signal
import threading
import time
from pathlib import Path

from localserve_native.wheels import Builds


def gone(pid: int, within_s: float = 5.0) -> bool:
    """Whether the process ended (a zombie waiting for its reaper counts as ended)."""
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except FileNotFoundError:
            return True
        if state == "Z":
            return True
        time.sleep(0.05)
    return False


def test_stopping_ends_a_running_build_and_the_processes_it_started(tmp_path: Path) -> None:
    builds = Builds()
    started = tmp_path / "compiler.pid"
    codes: list[int] = []
    shell = ("sh", "-c", f"sleep 60 & echo $! > {started}; wait")
    thread = threading.Thread(target=lambda: codes.append(builds(shell, {})))
    thread.start()
    deadline = time.monotonic() + 5
    while not (started.exists() and started.read_text().strip()):
        assert time.monotonic() < deadline, "the build never started"
        time.sleep(0.02)
    compiler = int(started.read_text())
    builds.stop()
    thread.join(10)
    assert codes == [-signal.SIGTERM]
    assert gone(compiler)


def test_a_build_asked_for_after_stopping_never_starts(tmp_path: Path) -> None:
    builds = Builds()
    builds.stop()
    marker = tmp_path / "ran"
    assert builds(("sh", "-c", f"touch {marker}"), {}) == -signal.SIGTERM
    assert not marker.exists()


def test_a_build_returns_its_exit_code() -> None:
    assert Builds()(("sh", "-c", "exit 3"), {}) == 3
