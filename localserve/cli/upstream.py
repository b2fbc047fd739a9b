"""`localserve upstream add | list | remove`: the OpenAI-compatible servers whose models the
daemon serves beside its own (docs/upstreams.md). They are written to config.toml, which the
daemon reads when it starts; `list` also shows each one's state when a daemon answers."""

from __future__ import annotations

import argparse
from typing import Any

from localserve.cli import output
from localserve.cli.common import Failure, address_options, connect
from localserve.cli.output import OK, USAGE
from localserve.client import ApiError, DaemonUnreachable
from localserve.ground import upstreams
from localserve.ground.settings import config_path

_RESTART = "restart the daemon to apply it (`localserve serve`, or its service)"


def add_parsers(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "upstream",
        help="serve the models of an OpenAI-compatible server (vLLM, SGLang, Ray Serve LLM)",
        description="Name an OpenAI-compatible server whose models are listed and forwarded to "
        "beside the local ones. Written to config.toml; the daemon reads it when it starts.",
    )
    cmds = p.add_subparsers(dest="upstream_command", required=True, metavar="ACTION")
    add = cmds.add_parser("add", help="add or replace an upstream")
    add.add_argument("name", metavar="NAME", help="its name, as in model@NAME")
    add.add_argument("url", metavar="URL", help="its base URL, as http://HOST:8000/v1")
    add.add_argument(
        "--key-env",
        metavar="VAR",
        help="the environment variable that holds its API key (the key itself is never written)",
    )
    add.add_argument(
        "--models",
        metavar="A,B",
        help="the models to take from it, comma-separated (default: all its /v1/models lists)",
    )
    add.set_defaults(handler=add_command)
    ls = cmds.add_parser("list", parents=[address_options()], help="list the upstreams")
    ls.set_defaults(handler=list_command)
    rm = cmds.add_parser("remove", aliases=["rm"], help="remove an upstream")
    rm.add_argument("name", metavar="NAME")
    rm.set_defaults(handler=remove_command)


def add_command(args: argparse.Namespace) -> int:
    try:
        name = upstreams.check_name(args.name)
        url = upstreams.normalize_url(args.url)
        models = None
        if args.models is not None:
            models = tuple(m.strip() for m in args.models.split(",") if m.strip())
            if not models:
                raise ValueError("--models names no model")
        config = upstreams.UpstreamConfig(name, url, args.key_env or None, models)
        replaced = upstreams.add(config_path(), config)
    except (ValueError, OSError) as exc:
        raise Failure(str(exc), USAGE) from None
    print(f"{'replaced' if replaced else 'added'} upstream {name} ({url}) in {config_path()}")
    if args.key_env and not config.key():
        output.note(f"${args.key_env} is not set here: the daemon reads it from its environment")
    output.note(_RESTART)
    return OK


def remove_command(args: argparse.Namespace) -> int:
    if not upstreams.remove(config_path(), args.name):
        raise Failure(f"no upstream named '{args.name}' in {config_path()}", USAGE)
    print(f"removed upstream {args.name} from {config_path()}")
    output.note(_RESTART)
    return OK


def list_command(args: argparse.Namespace) -> int:
    try:
        configured = upstreams.read(config_path())
    except upstreams.UpstreamConfigError as exc:
        raise Failure(str(exc), USAGE) from None
    live: dict[str, Any] | None = None
    try:
        _, client = connect(args)
        live = {u["name"]: u for u in client.health().get("upstreams", [])}
    except (DaemonUnreachable, ApiError):
        pass  # the file alone still says what is configured
    rows = []
    for up in configured:
        if live is None:
            state = "no daemon"
        else:  # one added since the daemon started is not served until it restarts
            state = live[up.name]["state"] if up.name in live else "restart to apply"
        models = ", ".join(up.models) if up.models is not None else "all it lists"
        rows.append(
            (
                up.name,
                up.url,
                models,
                f"${up.key_env}" if up.key_env else "-",
                state,
            )
        )
    output.table(("NAME", "URL", "MODELS", "KEY", "STATE"), rows)
    return OK
