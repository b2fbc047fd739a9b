"""The models in memory: `ps` and `stop`."""

from __future__ import annotations

import argparse

from localserve.cli import output
from localserve.cli.common import address_options, bare_name, connect
from localserve.cli.output import OK
from localserve.client import JSON


def add_parsers(sub: argparse._SubParsersAction) -> None:
    address = address_options()
    p = sub.add_parser(
        "ps", parents=[address], help="list the loaded models",
        description="The loaded models: size, device, requests in flight, and when each "
        "unloads if left idle.",
    )  # fmt: skip
    p.set_defaults(handler=ps_command)
    p = sub.add_parser("stop", parents=[address], help="unload a model",
                       description="Unload a model from memory (it stays on disk).")
    p.add_argument("model", metavar="NAME")
    p.set_defaults(handler=stop_command)


def ps_command(args: argparse.Namespace) -> int:
    _, client = connect(args)
    rows = [_row(m) for m in client.ps()]
    output.table(("NAME", "SIZE", "DEVICE", "IN FLIGHT", "UNTIL"), rows)
    return OK


def _row(model: JSON) -> tuple[str, str, str, str, str]:
    ours = model.get("localserve") or {}
    if ours.get("pinned"):
        until = "pinned"
    elif ours.get("in_flight"):
        until = "busy"  # the keep-alive countdown starts when the last request ends
    else:
        until = output.until(model.get("expires_at"))
    return (
        bare_name(str(model.get("name", ""))),
        output.size(model.get("size")),
        str(ours.get("device", "-")),
        str(ours.get("in_flight", 0)),
        until,
    )


def stop_command(args: argparse.Namespace) -> int:
    _, client = connect(args)
    client.unload(args.model)
    return OK
