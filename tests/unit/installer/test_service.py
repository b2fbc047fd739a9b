"""`localserve service`: the files that start localserve at login, checked by each platform's
own tools where this machine has them, and install -> status -> uninstall in a temporary home.

The service managers are never the real ones here: a runner stands in for systemctl,
launchctl and schtasks, so that no test can enable anything for the user running it.
"""

from __future__ import annotations

import os
import plistlib
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from localserve.ground.store_layout import MARKER
from localserve.store.importer import import_model
from localserve.store.model_store import ModelStore
from localserve_installer import service, units
from tests.support.cli_support import cli_env, localserve
from tests.support.prerequisites import require
from tests.support.store_support import smol_bytes

DAEMON = [sys.executable, "-m", "localserve", "serve"]


class Manager:
    """A service manager that records what it is told; `up` says whether it answers."""

    def __init__(self, up: bool = False) -> None:
        self.up = up
        self.commands: list[list[str]] = []

    def __call__(self, command: list[str]) -> tuple[int, str]:
        self.commands.append(command)
        if not self.up:
            return 1, "Failed to connect to bus: No medium found"
        return 0, "active" if "is-active" in command else ""


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty home folder, with the XDG folders inside it."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    for name, sub in (("CONFIG", ".config"), ("DATA", ".local/share"), ("STATE", ".local/state")):
        monkeypatch.setenv(f"XDG_{name}_HOME", str(home / sub))
    monkeypatch.delenv("LOCALSERVE_MODELS", raising=False)
    return home


def everything_in(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


def test_the_systemd_unit_passes_systemd_analyze_verify(tmp_path: Path) -> None:
    require(shutil.which("systemd-analyze"), "needs systemd-analyze (apt-get install systemd)")
    unit = tmp_path / service.UNIT
    unit.write_text(units.systemd_unit(DAEMON))
    runtime = tmp_path / "run"
    runtime.mkdir(mode=0o700)
    done = subprocess.run(
        ["systemd-analyze", "--user", "verify", str(unit)],
        capture_output=True,
        text=True,
        env={**os.environ, "XDG_RUNTIME_DIR": str(runtime)},
    )
    # It exits 0 on unknown keys too: only an empty stderr says the unit is clean.
    assert (done.returncode, done.stderr) == (0, "")


def test_systemctl_enables_the_unit_offline_with_the_link_install_makes(
    tmp_path: Path, home: Path
) -> None:
    require(shutil.which("systemctl"), "needs systemctl (apt-get install systemd)")
    # systemd 252 refuses --user with --root ("Invalid argument"); --global is its offline
    # form of the same [Install] section, into DIR/etc/systemd/user.
    root = tmp_path / "root"
    (root / "etc/systemd/user").mkdir(parents=True)
    (root / "etc/systemd/user" / service.UNIT).write_text(units.systemd_unit(DAEMON))
    done = subprocess.run(
        ["systemctl", "--global", f"--root={root}", "enable", service.UNIT],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    assert (root / "etc/systemd/user/default.target.wants" / service.UNIT).is_symlink()
    service.install(on=service.platform(Manager(up=False), "linux"))
    ours = home / ".config/systemd/user/default.target.wants" / service.UNIT
    assert ours.is_symlink() and ours.resolve() == (home / ".config/systemd/user" / service.UNIT)


def test_a_unit_command_with_spaces_and_percent_is_quoted_for_systemd() -> None:
    unit = units.systemd_unit(["/opt/my apps/python", "-m", "localserve", "serve", "50%"])
    assert 'ExecStart="/opt/my apps/python" -m localserve serve 50%%\n' in unit


def test_the_tray_autostart_entry_passes_desktop_file_validate(tmp_path: Path) -> None:
    require(
        shutil.which("desktop-file-validate"),
        "needs desktop-file-validate (apt-get install desktop-file-utils)",
    )
    entry = tmp_path / "localserve-tray.desktop"
    entry.write_text(units.autostart_entry(["/opt/my apps/python", "-m", "localserve_tray"]))
    done = subprocess.run(["desktop-file-validate", str(entry)], capture_output=True, text=True)
    assert (done.returncode, done.stdout + done.stderr) == (0, "")
    assert 'Exec="/opt/my apps/python" -m localserve_tray\n' in entry.read_text()


def test_the_launch_agents_round_trip_through_plistlib_with_launchds_keys() -> None:
    daemon = plistlib.loads(units.launch_agent(units.DAEMON_LABEL, DAEMON, "/tmp/l.log", True))
    assert daemon["Label"] == "dev.localserve.daemon"
    assert daemon["ProgramArguments"] == DAEMON
    assert daemon["RunAtLoad"] is True
    assert daemon["KeepAlive"] == {"SuccessfulExit": False}  # again after a crash, not a stop
    tray = plistlib.loads(units.launch_agent(units.TRAY_LABEL, DAEMON, "/tmp/l.log", True))
    assert tray["LimitLoadToSessionType"] == "Aqua"


def test_the_windows_logon_task_runs_the_daemon_as_this_user() -> None:
    import xml.etree.ElementTree as ET

    command = [r"C:\Program Files\Python\pythonw.exe", "-m", "localserve", "serve"]
    xml = units.logon_task("Starts localserve at logon", command, r"PC\ann", True)
    ns = {"t": "http://schemas.microsoft.com/windows/2004/02/mit/task"}
    task = ET.fromstring(xml.replace('encoding="UTF-16"', ""))
    assert task.find("t:Actions/t:Exec/t:Command", ns).text == command[0]
    assert task.find("t:Actions/t:Exec/t:Arguments", ns).text == "-m localserve serve"
    assert task.find("t:Triggers/t:LogonTrigger/t:UserId", ns).text == r"PC\ann"
    assert task.find("t:Settings/t:RestartOnFailure/t:Count", ns).text == "3"


@pytest.mark.parametrize("name", ["linux", "darwin", "win32"])
def test_install_status_uninstall_leaves_nothing_behind(name: str, home: Path) -> None:
    on = service.platform(Manager(up=True), name)
    assert not service.status(tray=True, on=on).installed
    service.install(tray=True, on=on)
    found = service.status(tray=True, on=on)
    assert found.installed and set(found.present) == {"daemon", "tray"}
    assert all(path.is_relative_to(home) for path in found.present.values())
    service.uninstall(tray=True, on=on)
    assert not service.status(tray=True, on=on).present
    assert everything_in(home) == []


def test_install_enables_and_starts_the_unit_when_user_systemd_answers(home: Path) -> None:
    manager = Manager(up=True)
    said = service.install(on=service.platform(manager, "linux"))
    assert ["systemctl", "--user", "enable", "--now", service.UNIT] in manager.commands
    assert "started" in said[0]


def test_install_without_user_systemd_links_the_unit_for_the_next_login(home: Path) -> None:
    said = service.install(on=service.platform(Manager(up=False), "linux"))
    assert "next login" in said[0]
    assert (home / ".config/systemd/user/default.target.wants" / service.UNIT).is_symlink()


def test_the_tray_entry_does_not_start_a_second_daemon_beside_the_service(home: Path) -> None:
    service.install(tray=True, on=service.platform(Manager(), "linux"))
    entry = (home / ".config/autostart/localserve-tray.desktop").read_text()
    assert "-m localserve_tray --no-start\n" in entry


def a_store(root: Path) -> Path:
    """A model store as the store lays one out, with one model imported by copy."""
    source = root.parent / "source.gguf"
    source.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(smol_bytes(), source)
    import_model(ModelStore(root), source, "kept", copy=True)
    return root


def test_uninstall_keeps_the_models_unless_purge(home: Path) -> None:
    models = a_store(home / ".local/share/localserve/models")
    on = service.platform(Manager(), "linux")
    service.install(on=on)
    service.uninstall(on=on)
    assert (models / "manifests/kept/latest.json").exists()
    said = service.uninstall(purge=True, on=on)
    assert not models.exists()
    assert f"removed {models}" in said


def test_purge_keeps_a_models_dir_that_holds_the_users_other_files(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # models_dir named the home folder itself: the store was made there, beside everything.
    (home / "thesis.tex").write_text("years of work")
    ModelStore(home).ensure()
    monkeypatch.setenv("LOCALSERVE_MODELS", str(home))
    said = service.uninstall(purge=True, on=service.platform(Manager(), "linux"))
    assert (home / "thesis.tex").read_text() == "years of work"
    assert (home / "blobs").is_dir()
    assert any(line.startswith(f"kept {home}: it holds ") for line in said), said


def test_purge_keeps_a_models_dir_of_model_files_that_is_no_store(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    models = home / "models"  # the settings' own example: a folder of the user's GGUF files
    models.mkdir()
    (models / "mine.gguf").write_bytes(b"GGUF")
    monkeypatch.setenv("LOCALSERVE_MODELS", str(models))
    said = service.uninstall(purge=True, on=service.platform(Manager(), "linux"))
    assert (models / "mine.gguf").exists()
    assert any(line.startswith(f"kept {models}") for line in said), said


def test_purge_keeps_another_servers_store_of_the_same_shape(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Ollama's store has blobs/ and manifests/ too, but manifests/<registry>/<ns>/<name>/<tag>.
    ollama = home / ".ollama/models"
    (ollama / "blobs").mkdir(parents=True)
    (ollama / "blobs" / ("sha256-" + "0" * 64)).write_bytes(b"GGUF")
    tag = ollama / "manifests/registry.ollama.ai/library/llama3.2/latest"
    tag.parent.mkdir(parents=True)
    tag.write_text("{}")
    monkeypatch.setenv("LOCALSERVE_MODELS", str(ollama))
    said = service.uninstall(purge=True, on=service.platform(Manager(), "linux"))
    assert tag.exists()
    assert any(line.startswith(f"kept {ollama}") for line in said), said


def test_purge_deletes_a_store_made_before_the_marker_by_its_layout(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    models = a_store(home / "old-store")
    (models / MARKER).unlink()
    monkeypatch.setenv("LOCALSERVE_MODELS", str(models))
    service.uninstall(purge=True, on=service.platform(Manager(), "linux"))
    assert not models.exists()


def test_the_service_command_says_what_is_installed(tmp_path: Path) -> None:
    env = cli_env(tmp_path, "http://127.0.0.1:9")
    env["HOME"] = str(tmp_path)
    done = localserve("service", "status", "--tray", env=env)
    assert done.returncode == 1
    assert "daemon: not installed" in done.stdout and "tray: not installed" in done.stdout
    assert "not answering at http://127.0.0.1:9" in done.stdout
