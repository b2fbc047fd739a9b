"""`localserve service install|uninstall|status [--tray]`: start the daemon (and the tray) at
this user's login, per user and never system-wide.

- Linux: a systemd user unit, enabled for this user; the tray as an XDG autostart entry.
- macOS: LaunchAgents in ~/Library/LaunchAgents, loaded with launchctl.
- Windows: Task Scheduler logon tasks, registered with schtasks; their XML is kept in the
  config folder so that status and uninstall know what was written.

Install writes the files, then registers them with the service manager; a manager that cannot
be reached now (no user systemd in a container) leaves them to take effect at the next login,
and says so. Uninstall unregisters and removes exactly what install wrote; the models stay,
unless purge, and even then only a folder proved to be the model store.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import platformdirs

from localserve.ground import places
from localserve.ground import settings as config
from localserve.ground.store_layout import why_not_a_store
from localserve_installer import units

UNIT = "localserve.service"
TASKS = {"daemon": "localserve", "tray": "localserve tray"}
# A command's exit status and output; a seam, so that tests of other platforms run anywhere.
Runner = Callable[[list[str]], tuple[int, str]]


def _run(command: list[str]) -> tuple[int, str]:
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return 127, str(exc)
    return done.returncode, (done.stdout + done.stderr).strip()


@dataclass(frozen=True)
class Entry:
    """One file that starts something at login: the daemon's service, or the tray's entry."""

    part: str  # "daemon" or "tray"
    path: Path
    content: bytes


@dataclass
class Status:
    platform: str
    present: dict[str, Path] = field(default_factory=dict)  # part -> its file, where written
    missing: dict[str, Path] = field(default_factory=dict)
    manager: str = ""  # the service manager's word on the daemon: active, loaded, registered

    @property
    def installed(self) -> bool:
        return not self.missing


def daemon_command() -> list[str]:
    python = Path(sys.executable)
    if sys.platform == "win32" and python.with_name("pythonw.exe").exists():
        python = python.with_name("pythonw.exe")  # no console window at logon
    return [str(python), "-m", "localserve", "serve"]


def tray_command() -> list[str]:
    # The service starts the daemon: a tray that raced it at login would start a second one.
    return [*daemon_command()[:2], "localserve_tray", "--no-start"]


class _Platform(ABC):
    name = ""

    def __init__(self, run: Runner) -> None:
        self.run = run

    @abstractmethod
    def entries(self, tray: bool) -> list[Entry]:
        """The files install writes: the daemon's, and the tray's when asked."""

    def register(self, entry: Entry) -> str:
        """Tell the service manager; returns what happened, for the user."""
        return ""

    def unregister(self, entry: Entry) -> None:  # noqa: B027 - nothing to undo by default
        pass

    def manager_state(self) -> str:
        return "unknown"


class _Linux(_Platform):
    name = "linux"

    def __init__(self, run: Runner) -> None:
        super().__init__(run)
        config_home = Path(os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config")
        self.units = config_home / "systemd" / "user"
        self.wants = self.units / "default.target.wants" / UNIT
        self.autostart = config_home / "autostart" / "localserve-tray.desktop"

    def entries(self, tray: bool) -> list[Entry]:
        found = [Entry("daemon", self.units / UNIT, units.systemd_unit(daemon_command()).encode())]
        if tray:
            found.append(
                Entry("tray", self.autostart, units.autostart_entry(tray_command()).encode())
            )
        return found

    def register(self, entry: Entry) -> str:
        if entry.part != "daemon":
            return "the tray starts at your next login"
        code, _ = self.run(["systemctl", "--user", "daemon-reload"])
        if code == 0:
            code, out = self.run(["systemctl", "--user", "enable", "--now", UNIT])
            if code == 0:
                return "enabled and started for this user (systemctl --user)"
        # No user systemd to talk to now: the link `enable` makes, made by hand.
        self.wants.parent.mkdir(parents=True, exist_ok=True)
        if not self.wants.is_symlink():
            self.wants.symlink_to(Path("..") / UNIT)
        return "enabled for this user; it starts at your next login (no user systemd answers now)"

    def unregister(self, entry: Entry) -> None:
        if entry.part == "daemon":
            self.run(["systemctl", "--user", "disable", "--now", UNIT])
            self.wants.unlink(missing_ok=True)
            _remove_empty(self.wants.parent)

    def manager_state(self) -> str:
        code, out = self.run(["systemctl", "--user", "is-active", UNIT])
        word = out.splitlines()[0] if out else ""
        return word if word in ("active", "inactive", "failed", "activating") else "unknown"


class _MacOS(_Platform):
    name = "macos"

    def __init__(self, run: Runner) -> None:
        super().__init__(run)
        self.agents = Path.home() / "Library" / "LaunchAgents"

    def entries(self, tray: bool) -> list[Entry]:
        log = str(places.log_dir() / "launchd.log")
        found = [
            Entry(
                "daemon",
                self.agents / f"{units.DAEMON_LABEL}.plist",
                units.launch_agent(units.DAEMON_LABEL, daemon_command(), log, True),
            )
        ]
        if tray:
            found.append(
                Entry(
                    "tray",
                    self.agents / f"{units.TRAY_LABEL}.plist",
                    units.launch_agent(units.TRAY_LABEL, tray_command(), log, True),
                )
            )
        return found

    def register(self, entry: Entry) -> str:
        places.log_dir().mkdir(parents=True, exist_ok=True)  # launchd opens the log, not us
        code, out = self.run(["launchctl", "load", "-w", str(entry.path)])
        return "loaded (launchctl)" if code == 0 else f"written; launchctl said: {out}"

    def unregister(self, entry: Entry) -> None:
        self.run(["launchctl", "unload", "-w", str(entry.path)])
        _remove_empty(places.log_dir())

    def manager_state(self) -> str:
        code, _ = self.run(["launchctl", "list", units.DAEMON_LABEL])
        return "loaded" if code == 0 else "not loaded"


class _Windows(_Platform):
    name = "windows"

    def __init__(self, run: Runner) -> None:
        super().__init__(run)
        self.tasks = Path(platformdirs.user_config_dir(config.APP, appauthor=False)) / "tasks"

    def entries(self, tray: bool) -> list[Entry]:
        user = os.environ.get("USERDOMAIN", "") + "\\" + os.environ.get("USERNAME", "")
        parts = {"daemon": (daemon_command(), True), "tray": (tray_command(), False)}
        return [
            Entry(
                part,
                self.tasks / f"{TASKS[part].replace(' ', '-')}.xml",
                units.logon_task(f"Starts {TASKS[part]} at logon", cmd, user, restart).encode(
                    "utf-16"
                ),
            )
            for part, (cmd, restart) in parts.items()
            if part == "daemon" or tray
        ]

    def register(self, entry: Entry) -> str:
        name = TASKS[entry.part]
        code, out = self.run(["schtasks", "/Create", "/TN", name, "/XML", str(entry.path), "/F"])
        return f"registered as the task '{name}'" if code == 0 else f"schtasks said: {out}"

    def unregister(self, entry: Entry) -> None:
        self.run(["schtasks", "/Delete", "/TN", TASKS[entry.part], "/F"])

    def manager_state(self) -> str:
        code, _ = self.run(["schtasks", "/Query", "/TN", TASKS["daemon"]])
        return "registered" if code == 0 else "not registered"


def platform(run: Runner = _run, name: str = sys.platform) -> _Platform:
    if name == "darwin":
        return _MacOS(run)
    if name == "win32":
        return _Windows(run)
    return _Linux(run)


def install(tray: bool = False, on: _Platform | None = None) -> list[str]:
    """Write and register the daemon's service (and the tray's entry); lines for the user."""
    on = on or platform()
    said = []
    for entry in on.entries(tray):
        entry.path.parent.mkdir(parents=True, exist_ok=True)
        entry.path.write_bytes(entry.content)
        said.append(f"{entry.part}: wrote {entry.path}; {on.register(entry)}")
    return said


def uninstall(tray: bool = False, purge: bool = False, on: _Platform | None = None) -> list[str]:
    """Unregister and remove what install wrote (the tray's entry too when asked, or when
    found); with purge, the models, logs and state as well."""
    on = on or platform()
    said = []
    for entry in on.entries(tray=True):
        if entry.part == "tray" and not tray and not entry.path.exists():
            continue
        if entry.path.exists():
            on.unregister(entry)
            entry.path.unlink()
            _remove_empty(entry.path.parent)
            said.append(f"{entry.part}: removed {entry.path}")
    if purge:
        said += _purge()
    return said or ["nothing was installed"]


def installed(tray: bool = False, on: _Platform | None = None) -> bool:
    """Whether every file install writes is there (without asking the service manager)."""
    return all(entry.path.exists() for entry in (on or platform()).entries(tray))


def status(tray: bool = False, on: _Platform | None = None) -> Status:
    on = on or platform()
    found = Status(on.name, manager=on.manager_state())
    for entry in on.entries(tray):
        (found.present if entry.path.exists() else found.missing)[entry.part] = entry.path
    return found


def _purge() -> list[str]:
    """Delete the models, logs and state. `models_dir` may name any folder (`~/models`, where
    the user keeps other files too): it goes only once it is proved a store holding nothing
    else (ground/store_layout.py); otherwise it stays, and the user is told why."""
    said = []
    models = places.models_dir(config.load())
    if models.exists() or models.is_symlink():
        why = why_not_a_store(models)
        if why is None:
            shutil.rmtree(models)
            said.append(f"removed {models}")
        else:
            said.append(f"kept {models}: {why}; delete what you no longer want in it yourself")
    state = Path(platformdirs.user_state_dir(config.APP, appauthor=False))
    for folder in (places.log_dir(), state):  # localserve's own folders, by their paths
        if folder.exists():
            shutil.rmtree(folder)
            said.append(f"removed {folder}")
    return said


def _remove_empty(folder: Path) -> None:
    """The folders install made, once nothing is left in them (never one with files), up to
    the home folder."""
    home = Path.home()
    while folder != home and home in folder.parents:
        try:
            folder.rmdir()
        except OSError:
            return
        folder = folder.parent
