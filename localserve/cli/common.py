"""What every client command shares: the address flags and the client they make."""

from __future__ import annotations

import argparse

from localserve.client import Client
from localserve.ground import settings as config


class Failure(Exception):
    """A failure the CLI explains in a sentence and ends with a given exit code."""

    def __init__(self, message: str, code: int) -> None:
        super().__init__(message)
        self.code = code


def address_options() -> argparse.ArgumentParser:
    """`--host` and `--port` for the commands that talk to a daemon (a parent parser)."""
    parent = argparse.ArgumentParser(add_help=False)
    group = parent.add_argument_group("daemon address")
    group.add_argument("--host", help="the daemon's address (env LOCALSERVE_HOST)")
    group.add_argument("--port", type=int, help="the daemon's port (env LOCALSERVE_PORT)")
    return parent


def connect(args: argparse.Namespace) -> tuple[config.Settings, Client]:
    settings = config.load({"host": args.host, "port": args.port})
    return settings, Client(settings.url)
