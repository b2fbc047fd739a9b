"""The system tray app (`localserve tray`, or `localserve-tray`): the daemon's status, its
loaded models with Unload and Pin, Load ▸, start at login. Floor 5: it speaks to the daemon
over HTTP through localserve.client only, and imports no engine."""

from __future__ import annotations

import argparse
import importlib.util
import logging
import os
import sys


def choose_backend() -> None:
    """On Linux, AppIndicator where its bindings are present, else plain X11 (pystray's
    `xorg`); macOS and Windows have one each. PYSTRAY_BACKEND, when set, wins."""
    if not sys.platform.startswith("linux") or os.environ.get("PYSTRAY_BACKEND"):
        return
    os.environ["PYSTRAY_BACKEND"] = "appindicator" if _has_appindicator() else "xorg"


def _has_appindicator() -> bool:
    if importlib.util.find_spec("gi") is None:
        return False
    try:
        import gi

        for name in ("AyatanaAppIndicator3", "AppIndicator3"):
            try:
                gi.require_version(name, "0.1")
                return True
            except ValueError:
                continue
    except Exception:  # broken GObject bindings: fall back rather than fail to start
        return False
    return False


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--host", help="the daemon's address (env LOCALSERVE_HOST)")
    parser.add_argument("--port", type=int, help="the daemon's port (env LOCALSERVE_PORT)")
    parser.add_argument(
        "--no-start",
        action="store_true",
        help="do not start a daemon when none answers (the menu still offers to)",
    )


def run(args: argparse.Namespace) -> int:
    choose_backend()
    from localserve.ground import settings as config

    try:
        from localserve_tray.app import Tray
    except ImportError as exc:  # the tray extra is not installed
        print(
            f"localserve tray: {exc}; install it with pip install 'localserve[tray]'",
            file=sys.stderr,
        )
        return 2

    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    try:
        settings = config.load({"host": args.host, "port": args.port})
    except config.ConfigError as exc:
        print(f"localserve tray: {exc}", file=sys.stderr)
        return 2
    Tray(settings, start_daemon=not args.no_start).run()
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="localserve-tray", description=__doc__.split("\n\n")[0])
    add_arguments(parser)
    return run(parser.parse_args(argv))
