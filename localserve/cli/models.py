"""The models on disk: `pull`, `list`, `show` and `rm` (Ollama's /api/pull, tags, show, delete),
and `import` and `scan` for models a user already has (our /api/admin/import and /scan)."""

from __future__ import annotations

import argparse
import os
from typing import Any

from localserve.cli import output
from localserve.cli.common import address_options, connect
from localserve.cli.cutoff import Daemon
from localserve.cli.output import FAILED, OK
from localserve.cli.run import pull
from localserve.client import StreamCutOff, bare_name


def add_parsers(sub: argparse._SubParsersAction) -> None:
    address = address_options()
    p = sub.add_parser(
        "pull",
        parents=[address],
        help="download a model",
        description="Download a model into the store, with progress.",
    )
    p.add_argument("model", metavar="NAME")
    p.set_defaults(handler=pull_command)

    p = sub.add_parser(
        "list",
        aliases=["ls"],
        parents=[address],
        help="list downloaded models",
        description="List the models on disk: name, size, last modified.",
    )
    p.set_defaults(handler=list_command)

    p = sub.add_parser(
        "show",
        parents=[address],
        help="show a model's details",
        description="Show a model's architecture, parameters and license.",
    )
    p.add_argument("model", metavar="NAME")
    p.set_defaults(handler=show_command)

    p = sub.add_parser(
        "rm",
        parents=[address],
        help="delete a downloaded model",
        description="Delete a model from the store.",
    )
    p.add_argument("model", metavar="NAME", nargs="+")
    p.set_defaults(handler=rm_command)

    p = sub.add_parser(
        "import",
        parents=[address],
        help="register a GGUF file or ONNX folder",
        description="Register a model file (GGUF) or folder (ONNX) under a name. "
        "It is linked where it lies (rm never deletes it) unless --copy is given.",
    )
    p.add_argument("path", metavar="PATH")
    p.add_argument("--name", help="the name to serve it under (default: from the file name)")
    p.add_argument("--copy", action="store_true", help="copy it into the store instead of linking")
    p.set_defaults(handler=import_command)

    p = sub.add_parser(
        "scan",
        parents=[address],
        help="list the models in a folder",
        description="List the GGUF files and ONNX folders under a folder, such as "
        "an LM Studio or llama.cpp cache, and say which are broken.",
    )
    p.add_argument("path", metavar="FOLDER")
    p.set_defaults(handler=scan_command)


def pull_command(args: argparse.Namespace) -> int:
    _, client = connect(args)
    try:
        pull(client, args.model)
    except StreamCutOff as exc:
        Daemon(client).report(exc)
        return FAILED
    return OK


def list_command(args: argparse.Namespace) -> int:
    _, client = connect(args)
    rows = [
        (
            bare_name(str(m.get("name", ""))),
            _size(m),
            output.ago(m.get("modified_at")),
        )
        for m in client.tags()
    ]
    output.table(("NAME", "SIZE", "MODIFIED"), rows)
    return OK


def _size(model: dict[str, Any]) -> str:
    """A local model's size; an upstream's model (docs/upstreams.md) takes none here; a damaged
    one says so, so that the user knows to pull, import or `rm` it again."""
    ours = model.get("localserve") or {}
    if ours.get("damaged"):
        return "damaged"
    remote = ours.get("remote")
    if remote:
        return f"remote: {remote.get('upstream', '?')}"
    return output.size(model.get("size"))


def show_command(args: argparse.Namespace) -> int:
    _, client = connect(args)
    info = client.show(args.model)
    details: dict[str, Any] = info.get("details") or {}
    model_info: dict[str, Any] = info.get("model_info") or {}
    arch = str(model_info.get("general.architecture") or details.get("family") or "")
    rows = [
        ("architecture", arch),
        ("parameters", details.get("parameter_size")),
        ("context length", (info.get("localserve") or {}).get("context_length")),
        ("context per slot", model_info.get(f"{arch}.context_length")),
        ("embedding length", model_info.get(f"{arch}.embedding_length")),
        ("quantization", details.get("quantization_level")),
        ("format", details.get("format")),
        ("chat template", _yes_no((info.get("localserve") or {}).get("has_chat_template"))),
    ]
    _section("Model", [(k, str(v)) for k, v in rows if v not in (None, "")])
    loaded = (info.get("localserve") or {}).get("loaded")
    if loaded:
        split = ", ".join(f"{pool} {output.size(n)}" for pool, n in loaded["split"].items() if n)
        layers = f"{loaded['gpu_layers']}/{loaded['layers']} layers on a GPU"
        _section(
            "Loaded", [("device", str(loaded["device"])), ("layers", layers), ("memory", split)]
        )
    capabilities = info.get("capabilities") or []
    if capabilities:
        _section("Capabilities", [(str(c), "") for c in capabilities])
    parameters = str(info.get("parameters") or "").strip()
    if parameters:
        _section("Parameters", [(line, "") for line in parameters.splitlines()])
    license_text = str(info.get("license") or "").strip()
    if license_text:
        _section("License", [(line, "") for line in license_text.splitlines()[:2]])
    return OK


def _yes_no(value: object) -> str | None:
    return None if value is None else ("yes" if value else "no")


def _section(title: str, rows: list[tuple[str, str]]) -> None:
    output.stdout.print(f"  {title}", style="bold", markup=False)
    for label, value in rows:
        output.stdout.print(f"    {label:<20}{value}".rstrip(), markup=False)
    output.stdout.print()


def rm_command(args: argparse.Namespace) -> int:
    _, client = connect(args)
    for name in args.model:
        client.delete(name)
        print(f"deleted '{name}'")
    return OK


def import_command(args: argparse.Namespace) -> int:
    _, client = connect(args)
    # The daemon reads the file, so it needs the path as this shell sees it, made absolute.
    answer = client.import_model(
        os.path.abspath(os.path.expanduser(args.path)), args.name, args.copy
    )
    how = "linked" if answer.get("linked") else "copied"
    print(
        f"imported '{answer.get('model')}' "
        f"({answer.get('format')}, {output.size(answer.get('size'))}, {how})"
    )
    return OK


def scan_command(args: argparse.Namespace) -> int:
    _, client = connect(args)
    rows = []
    for found in client.scan(os.path.abspath(os.path.expanduser(args.path))):
        facts: dict[str, Any] = found.get("facts") or {}
        what = found.get("problem") or " ".join(
            str(v) for v in (facts.get("architecture"), facts.get("quantization")) if v
        )
        rows.append((str(found.get("path")), output.size(found.get("size")), what))
    output.table(("PATH", "SIZE", "MODEL"), rows)
    return OK
