"""`localserve service install|uninstall|status [--tray]`, and `localserve tray`."""

from __future__ import annotations

import argparse

from localserve.cli.common import address_options, connect
from localserve.cli.output import OK
from localserve.client import DaemonUnreachable
from localserve_installer import service

NOT_INSTALLED = 1


def add_parsers(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "service",
        help="start localserve at login: install, uninstall, status",
        description="Start the daemon (and with --tray, the tray) when you log in: a systemd "
        "user unit and an autostart entry on Linux, LaunchAgents on macOS, logon tasks on "
        "Windows. For this user only, never system-wide.",
    )
    actions = p.add_subparsers(dest="action", required=True, metavar="ACTION")
    for name, text in (
        ("install", "start at login"),
        ("uninstall", "stop starting at login"),
        ("status", "what is installed, and whether it runs"),
    ):
        a = actions.add_parser(
            name,
            parents=[address_options()] if name == "status" else [],
            help=text,
            description=text[0].upper() + text[1:] + ".",
        )
        a.add_argument("--tray", action="store_true", help="the tray too")
        if name == "uninstall":
            a.add_argument(
                "--purge",
                action="store_true",
                help="also delete the models, logs and state (never without it)",
            )
        a.set_defaults(handler=service_command)
    p = sub.add_parser(
        "tray",
        parents=[address_options()],
        help="the system tray icon",
        description="A tray icon with the daemon's status and loaded models; it starts a "
        "daemon if none answers, and stops that one (only) on Quit.",
    )
    p.add_argument(
        "--no-start", action="store_true", help="do not start a daemon when none answers"
    )
    p.set_defaults(handler=tray_command)


def service_command(args: argparse.Namespace) -> int:
    if args.action == "install":
        lines = service.install(tray=args.tray)
    elif args.action == "uninstall":
        lines = service.uninstall(tray=args.tray, purge=args.purge)
    else:
        return _status(args)
    print("\n".join(lines))
    return OK


def _status(args: argparse.Namespace) -> int:
    found = service.status(tray=args.tray)
    for part, path in found.present.items():
        print(f"{part}: installed ({path})")
    for part, path in found.missing.items():
        print(f"{part}: not installed (would be {path})")
    settings, client = connect(args)
    try:
        client.health(timeout=3.0)
        answering = f"answering at {settings.url}"
    except DaemonUnreachable:
        answering = f"not answering at {settings.url}"
    print(f"service manager: {found.manager}; daemon {answering}")
    return OK if found.installed else NOT_INSTALLED


def tray_command(args: argparse.Namespace) -> int:
    import localserve_tray as tray  # pystray and Pillow, only for this command

    return tray.run(args)
