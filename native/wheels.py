"""Running a recipe's plan: a wheel of llama-cpp-python built once per machine, then installed.

The wheel is built into a temporary folder and moved under its key only when the build
succeeded, so a build cut off half way never passes for a finished one. A recipe with source
guards downloads the sdist, edits it, and builds from the edited folder.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import tarfile
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path

from localserve_native.recipes import Guard, Plan, cached_wheel

# Runs one command with the build's environment added; returns its exit code.
Runner = Callable[[tuple[str, ...], dict[str, str]], int]


class BuildFailed(RuntimeError):
    """A step of the build failed; the message says which."""


def _run(command: tuple[str, ...], env: dict[str, str]) -> int:
    # Output streams straight to the terminal: a build of minutes shows it is alive, and a
    # failure shows the compiler's own words.
    return subprocess.run(list(command), env={**os.environ, **env}).returncode


class Builds:
    """A Runner for a build in the daemon's background (native/remedy.py): each command runs in
    a session of its own, so that `stop` ends the compilers pip started as well as pip; killing
    pip alone leaves them building, orphaned, after the daemon is gone."""

    def __init__(self) -> None:
        self.stopped = False
        self._running: set[subprocess.Popen[bytes]] = set()
        self._lock = threading.Lock()

    def __call__(self, command: tuple[str, ...], env: dict[str, str]) -> int:
        with self._lock:
            if self.stopped:
                return -signal.SIGTERM
            child = subprocess.Popen(
                list(command), env={**os.environ, **env}, start_new_session=True
            )
            self._running.add(child)
        try:
            return child.wait()
        finally:
            with self._lock:
                self._running.discard(child)

    def stop(self, grace_s: float = 5.0) -> None:
        """End every command running, and refuse the ones after."""
        with self._lock:
            self.stopped = True
            running = list(self._running)
        for child in running:
            _signal_group(child, signal.SIGTERM)
        for child in running:
            with contextlib.suppress(subprocess.TimeoutExpired):
                child.wait(grace_s)
            _signal_group(child, signal.SIGKILL)  # whatever outlived the grace, leader or not


def _signal_group(child: subprocess.Popen[bytes], sig: int) -> None:
    try:
        os.killpg(child.pid, sig)  # the session's group: its id is the leader's pid
    except ProcessLookupError:
        pass


def guarded(text: str, guard: Guard) -> str:
    """`text` with the guard's lines wrapped in #if/#else/#endif; refuses a source where the
    lines are not found once each, in order (the recipe is for another version)."""
    lines = text.split("\n")
    try:
        first = lines.index(guard.first)
        last = lines.index(guard.last, first)
    except ValueError:
        raise BuildFailed(
            f"{guard.file}: the lines to guard with `#if {guard.condition}` are not there; "
            "the recipe is out of date for this version"
        ) from None
    if lines.count(guard.first) != 1:
        raise BuildFailed(f"{guard.file}: the first line to guard appears more than once")
    wrapped = [
        f"#if {guard.condition}",
        *lines[first : last + 1],
        "#else",
        guard.otherwise,
        "#endif",
    ]
    return "\n".join(lines[:first] + wrapped + lines[last + 1 :])


def _edited_source(plan: Plan, folder: Path, run: Runner) -> str:
    code = run(plan.download_command(str(folder)), {})
    sdists = sorted(folder.glob("*.tar.gz"))
    if code != 0 or not sdists:
        raise BuildFailed(f"downloading the source of {plan.recipe.name}'s build failed ({code})")
    with tarfile.open(sdists[0]) as archive:
        archive.extractall(folder, filter="data")
    (source,) = [p for p in folder.iterdir() if p.is_dir()]
    for guard in plan.recipe.guards:
        path = source / guard.file
        path.write_text(guarded(path.read_text("utf-8"), guard), "utf-8")
    return str(source)


def build(plan: Plan, run: Runner = _run) -> tuple[Path, bool]:
    """The plan's wheel, and whether it was built now (False: it was kept from before)."""
    kept = cached_wheel(plan)
    if kept is not None:
        return kept, False
    plan.wheel_dir.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=plan.wheel_dir.parent, prefix=".build-") as tmp:
        work = Path(tmp)
        source = _edited_source(plan, work / "src", run) if plan.recipe.guards else None
        out = work / "out"
        command = plan.wheel_command(source) if source else plan.wheel_command()
        command = (*command[:-2], str(out), command[-1])  # -w into the temporary folder
        code = run(command, dict(plan.env))
        wheels = sorted(out.glob("llama_cpp_python-*.whl"))
        if code != 0 or not wheels:
            raise BuildFailed(f"the build failed: pip exited with {code} (its output is above)")
        shutil.rmtree(plan.wheel_dir, ignore_errors=True)
        out.rename(plan.wheel_dir)
    wheel = cached_wheel(plan)
    assert wheel is not None
    return wheel, True


def install(plan: Plan, wheel: Path, run: Runner = _run) -> None:
    code = run(plan.install_command(str(wheel)), {})
    if code != 0:
        raise BuildFailed(f"installing {wheel.name} failed: pip exited with {code}")
