"""The models in memory: `ps` and `stop`."""

from __future__ import annotations

import argparse

from localserve.cli import output
from localserve.cli.common import address_options, connect
from localserve.cli.output import OK
from localserve.client import JSON, bare_name


def add_parsers(sub: argparse._SubParsersAction) -> None:
    address = address_options()
    p = sub.add_parser(
        "ps",
        parents=[address],
        help="list the loaded models",
        description="The loaded models: size, device, requests in flight, and when each "
        "unloads if left idle.",
    )
    p.set_defaults(handler=ps_command)
    p = sub.add_parser(
        "stop",
        parents=[address],
        help="unload a model",
        description="Unload a model from memory (it stays on disk).",
    )
    p.add_argument("model", metavar="NAME")
    p.set_defaults(handler=stop_command)


def ps_command(args: argparse.Namespace) -> int:
    _, client = connect(args)
    rows = [_row(m) for m in client.ps()]
    output.table(("NAME", "SIZE", "PROCESSOR", "DEVICE", "KV CACHE", "IN FLIGHT", "UNTIL"), rows)
    return OK


def processor(gpu_layers: int, layers: int) -> str:
    """Where a model runs, as `ollama ps` says it: 100% GPU, 48%/52% CPU/GPU, 100% CPU. By
    layers: the input embeddings and the host buffers stay in RAM even at 100% GPU."""
    if layers <= 0 or gpu_layers <= 0:
        return "100% CPU"
    gpu = round(100 * min(gpu_layers, layers) / layers)
    return "100% GPU" if gpu >= 100 else f"{100 - gpu}%/{gpu}% CPU/GPU"


def _row(model: JSON) -> tuple[str, str, str, str, str, str, str]:
    ours = model.get("localserve") or {}
    placement = ours.get("placement") or {}
    if ours.get("pinned"):
        until = "pinned"
    elif ours.get("in_flight"):
        until = "busy"  # the keep-alive countdown starts when the last request ends
    else:
        until = output.until(model.get("expires_at"))
    return (
        bare_name(str(model.get("name", ""))),
        output.size(model.get("size")),
        # An upstream's model (docs/upstreams.md) runs on no processor of this machine.
        "remote"
        if ours.get("remote")
        else processor(int(placement.get("gpu_layers") or 0), int(placement.get("layers") or 0)),
        _device(ours),
        str(ours.get("kv_cache_type", "-")),
        str(ours.get("in_flight", 0)),
        until,
    )


def _device(ours: JSON) -> str:
    """The device, and the layers it holds when they are not all of them: gpu0 (15/31 layers)."""
    placement = ours.get("placement") or {}
    device = str(ours.get("device", "-"))
    layers, of = placement.get("gpu_layers"), placement.get("layers")
    if layers and of and layers < of:
        device += f" ({layers}/{of} layers)"
    return device


def stop_command(args: argparse.Namespace) -> int:
    _, client = connect(args)
    client.unload(args.model)
    return OK
