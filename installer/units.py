"""The files that start localserve at login, as text: a systemd user unit and an XDG autostart
entry (Linux), LaunchAgent plists (macOS), Task Scheduler logon tasks (Windows). Pure: the
commands they run come in, the text goes out; service.py writes and registers them."""

from __future__ import annotations

import plistlib
from collections.abc import Sequence
from xml.sax.saxutils import escape

DAEMON_LABEL = "dev.localserve.daemon"
TRAY_LABEL = "dev.localserve.tray"


def systemd_unit(command: Sequence[str]) -> str:
    """The daemon as a user service. Installed per user (~/.config/systemd/user), never in
    the global user-unit folder: that starts a copy in every session, the login screen's
    included, all fighting for the port (lemonade#2125)."""
    return "\n".join(
        [
            "[Unit]",
            "Description=localserve, a local LLM server",
            "After=network.target",
            "",
            "[Service]",
            "Type=simple",
            f"ExecStart={_systemd_line(command)}",
            "Restart=on-failure",
            "RestartSec=5",
            "",
            "[Install]",
            "WantedBy=default.target",
            "",
        ]
    )


def _systemd_line(command: Sequence[str]) -> str:
    # systemd splits ExecStart on spaces, honours double quotes, and expands % and $.
    def word(arg: str) -> str:
        arg = arg.replace("%", "%%").replace("$", "$$")
        if any(c in arg for c in " \t\"\\'"):
            return '"' + arg.replace("\\", "\\\\").replace('"', '\\"') + '"'
        return arg

    return " ".join(word(a) for a in command)


def autostart_entry(command: Sequence[str]) -> str:
    """The tray in the XDG autostart folder: desktops start it when this user logs in."""
    return "\n".join(
        [
            "[Desktop Entry]",
            "Type=Application",
            "Name=localserve tray",
            "Comment=Shows and controls the models localserve keeps loaded",
            f"Exec={_desktop_line(command)}",
            "Terminal=false",
            "Categories=Utility;",
            "X-GNOME-Autostart-enabled=true",
            "",
        ]
    )


def _desktop_line(command: Sequence[str]) -> str:
    # The Desktop Entry spec: quote an argument with reserved characters, escape ", `, $, \,
    # and write a literal % as %% (field codes start with %).
    reserved = set(" \t\n\"'\\><~|&;$*?#()`")

    def word(arg: str) -> str:
        arg = arg.replace("%", "%%")
        if not any(c in reserved for c in arg):
            return arg
        return '"' + "".join("\\" + c if c in '"`$\\' else c for c in arg) + '"'

    return " ".join(word(a) for a in command)


def launch_agent(label: str, command: Sequence[str], log: str, restart_on_failure: bool) -> bytes:
    """A LaunchAgent: this user's launchd starts it at login (RunAtLoad), and again after a
    crash (KeepAlive when the exit was not a success) but not after a clean stop."""
    agent: dict[str, object] = {
        "Label": label,
        "ProgramArguments": list(command),
        "RunAtLoad": True,
        "StandardOutPath": log,
        "StandardErrorPath": log,
        "ProcessType": "Interactive" if label == TRAY_LABEL else "Background",
    }
    if restart_on_failure:
        agent["KeepAlive"] = {"SuccessfulExit": False}
    if label == TRAY_LABEL:
        agent["LimitLoadToSessionType"] = "Aqua"  # a menu bar needs the user's GUI session
    return plistlib.dumps(agent)


def logon_task(description: str, command: Sequence[str], user: str, restart: bool) -> str:
    """A Task Scheduler task that starts at this user's logon, as this user, with no window;
    schtasks /Create /XML reads it (UTF-16 is what it expects on disk)."""
    program, *args = command
    restart_xml = (
        "    <RestartOnFailure><Interval>PT1M</Interval><Count>3</Count></RestartOnFailure>\n"
        if restart
        else ""
    )
    return (
        '<?xml version="1.0" encoding="UTF-16"?>\n'
        '<Task version="1.2" xmlns="http://schemas.microsoft.com/windows/2004/02/mit/task">\n'
        f"  <RegistrationInfo><Description>{escape(description)}</Description></RegistrationInfo>\n"
        "  <Triggers>\n"
        f"    <LogonTrigger><Enabled>true</Enabled><UserId>{escape(user)}</UserId></LogonTrigger>\n"
        "  </Triggers>\n"
        "  <Principals>\n"
        f'    <Principal id="Author"><UserId>{escape(user)}</UserId>'
        "<LogonType>InteractiveToken</LogonType><RunLevel>LeastPrivilege</RunLevel></Principal>\n"
        "  </Principals>\n"
        "  <Settings>\n"
        "    <MultipleInstancesPolicy>IgnoreNew</MultipleInstancesPolicy>\n"
        "    <DisallowStartIfOnBatteries>false</DisallowStartIfOnBatteries>\n"
        "    <StopIfGoingOnBatteries>false</StopIfGoingOnBatteries>\n"
        "    <ExecutionTimeLimit>PT0S</ExecutionTimeLimit>\n"
        f"{restart_xml}"
        "  </Settings>\n"
        '  <Actions Context="Author">\n'
        f"    <Exec><Command>{escape(program)}</Command>"
        f"<Arguments>{escape(windows_command_line(args))}</Arguments></Exec>\n"
        "  </Actions>\n"
        "</Task>\n"
    )


def windows_command_line(args: Sequence[str]) -> str:
    """Arguments as Windows programs split them (the C runtime's rules, as subprocess writes)."""
    import subprocess

    return subprocess.list2cmdline(list(args))
