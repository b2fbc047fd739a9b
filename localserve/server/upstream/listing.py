"""Upstream models in each face's listings, marked remote: /v1/models (`owned_by` the upstream,
`remote`), /api/tags and /api/ps (`remote_model`, `remote_host` as Ollama's own cloud models
carry them, and no local size: they take no memory here). /api/ps lists one only while a
request to it is in flight, as nothing of it is loaded here."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from datetime import datetime, timezone
from typing import Any

from aiohttp import web

from localserve.server.http.state import MANAGER, model_library
from localserve.server.upstream.forward import UPSTREAMS
from localserve.server.upstream.registry import Route


async def local_names(request: web.Request) -> set[str]:
    """The local models' names (pulled, embedded, loaded), read off the event loop."""
    manager = request.app[MANAGER]
    stored = await asyncio.get_running_loop().run_in_executor(None, model_library(request).models)
    return {m.name.short for m in stored} | {m.name for m in manager.models}


def routes(request: web.Request, local: Iterable[str]) -> list[Route]:
    """Every upstream model, named as it is reached when `local` are the local models' names."""
    registry = request.app.get(UPSTREAMS)
    if registry is None or not registry.upstreams:
        return []
    # As the store compares names: without the `:latest` tag, in any case.
    names = {n.lower().removesuffix(":latest") for n in local}
    return registry.listed(lambda n: n.lower().removesuffix(":latest") in names)


def remote(r: Route) -> dict[str, Any]:
    """What tells a client where the model runs."""
    up = r.upstream
    state = up.health()["state"]
    return {"upstream": up.name, "url": up.config.url, "model": r.model.id, "state": state}


def openai_entry(r: Route) -> dict[str, Any]:
    created = r.model.created or int(r.upstream.probed_at or 0)
    when = datetime.fromtimestamp(created, timezone.utc).isoformat().replace("+00:00", "Z")
    return {
        "id": r.name,
        "object": "model",
        "created": created,
        "owned_by": f"upstream:{r.upstream.name}",
        "context_length": r.model.context_length,
        "type": "model",
        "display_name": r.name,
        "created_at": when,
        "remote": remote(r),
    }


def _details() -> dict[str, Any]:
    return {
        "parent_model": "",
        "format": "remote",
        "family": "",
        "families": [],
        "parameter_size": "",
        "quantization_level": "",
    }


def ollama_tag(r: Route) -> dict[str, Any]:
    created = r.model.created or int(r.upstream.probed_at or 0)
    return {
        "name": r.name,
        "model": r.name,
        "modified_at": datetime.fromtimestamp(created, timezone.utc).isoformat(),
        "size": 0,
        "digest": "",
        "remote_model": r.model.id,
        "remote_host": r.upstream.config.url,
        "details": _details(),
        "localserve": {"remote": remote(r), "context_length": r.model.context_length},
    }


def ollama_show(r: Route) -> dict[str, Any]:
    """/api/show of an upstream model: what is known here (its context, where it runs); its
    template and weights are the upstream's."""
    context = r.model.context_length
    return {
        "license": "",
        "modelfile": f"# localserve: {r.name}, served by upstream {r.upstream.name}\n",
        "parameters": f"num_ctx {context}" if context else "",
        "template": "",
        "details": _details(),
        "model_info": {"general.architecture": "remote", "remote.context_length": context},
        # What a Chat Completions server may do; whether the model does is the upstream's say.
        "capabilities": ["completion", "tools"],
        "modified_at": datetime.fromtimestamp(
            r.model.created or int(r.upstream.probed_at or 0), timezone.utc
        ).isoformat(),
        "remote_model": r.model.id,
        "remote_host": r.upstream.config.url,
        "localserve": {"remote": remote(r), "context_length": context},
    }


def ollama_ps(request: web.Request, local: Iterable[str]) -> list[dict[str, Any]]:
    """The upstream models with a request in flight, in /api/ps's shape, with no memory here."""
    out = []
    for r in routes(request, local):
        busy = r.upstream.in_flight.get(r.model.id, 0)
        if not busy:
            continue
        out.append(
            {
                "name": r.name,
                "model": r.name,
                "size": 0,
                "size_vram": 0,
                "digest": "",
                "expires_at": datetime.now(timezone.utc).isoformat(),
                "context_length": r.model.context_length,
                "details": _details(),
                "remote_model": r.model.id,
                "remote_host": r.upstream.config.url,
                # `localserve ps` shows where it runs in its device column.
                "localserve": {
                    "remote": remote(r),
                    "device": f"remote:{r.upstream.name}",
                    "in_flight": busy,
                },
            }
        )
    return out
