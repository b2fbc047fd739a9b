"""The store over HTTP, in Ollama's wire format: /api/tags, /api/show, /api/pull, /api/delete.

Plus our own /api/admin/import and /api/admin/scan, which the CLI's `import` and `scan` use.
Disk work (manifests, hashing, downloads) runs on worker threads; a pull streams Ollama's
progress objects as NDJSON while it runs, and a client that leaves stops the download (what
arrived stays in partial/ and the next pull resumes from it).
"""

from __future__ import annotations

import asyncio
import json
import threading
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from aiohttp import web

from localserve.ground.model import ModelRef
from localserve.ground.units import parameter_size
from localserve.server.chat import fim
from localserve.server.http.errors import classify
from localserve.server.http.guard import OPERATOR
from localserve.server.http.readers import model_name, read_json
from localserve.server.http.state import (
    MANAGER,
    aliases,
    context_length,
    model_library,
    model_named,
)
from localserve.server.http.streaming import open_ndjson, send_line
from localserve.server.turn.run import on_model
from localserve.server.upstream import listing
from localserve.server.upstream.registry import Route
from localserve.server.wire import store as wire
from localserve.store.hub import looks_like_ref, parse_ref
from localserve.store.importer import Roots, import_model, scan
from localserve.store.library import Library
from localserve.store.manifest import Manifest
from localserve.store.names import parse_name
from localserve.store.resolve import canonical_name

# The pulls running now, by name: their latest progress, for /health (the tray shows it).
PULLS = web.AppKey("pulls", dict)


class PullCancelled(Exception):
    """The client went away: stop downloading (the partial file is kept for a resume)."""


async def _off_loop(func: Any, *args: Any) -> Any:
    return await asyncio.get_running_loop().run_in_executor(None, func, *args)


def _iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, timezone.utc).isoformat()


def _details(manifest: Manifest) -> dict[str, Any]:
    facts = manifest.extra.get("facts", {})
    family = facts.get("architecture", "unknown")
    return {
        "parent_model": "",
        "format": manifest.format,
        "family": family,
        "families": [family],
        "parameter_size": parameter_size(int(facts.get("parameters", 0))),
        "quantization_level": facts.get("quantization", "unknown"),
    }


def _listed(library: Library, manifest: Manifest) -> tuple[Manifest, str, str | None]:
    """A model with its digest (hashing a file in place takes a moment, once), or with why it
    cannot load: a damaged file is never hashed, so no digest of half a file is kept."""
    damage = library.damage(manifest)
    if damage is not None:
        return manifest, "", damage
    try:
        return manifest, library.digest(manifest), None
    except OSError as exc:  # the file went between the check and the hash
        library.note_damage(manifest.name.short, str(exc))
        return manifest, "", str(exc)


def _served(request: web.Request) -> list[ModelRef]:
    """The models this daemon serves by name, loaded or not (a `serve --model FILE` one too)."""
    manager = request.app.get(MANAGER)
    return list(manager.known.values()) if manager is not None else []


async def tags(request: web.Request) -> web.Response:
    library = model_library(request)
    served = _served(request)

    def listed() -> list[tuple[Manifest, str, str | None]]:
        return [_listed(library, m) for m in library.models(served)]

    models = [
        {
            "name": str(m.name),
            "model": str(m.name),
            "modified_at": _iso(m.created_at),
            "size": m.size,
            "digest": digest.removeprefix("sha256:"),
            "details": _details(m),
            # Listed, so that `localserve list` shows it and `rm` can remove it, but marked.
            **({"localserve": {"damaged": damage}} if damage else {}),
        }
        for m, digest, damage in await _off_loop(listed)
    ]
    by_name = {canonical_name(str(m["name"])): m for m in models}
    for alias, model in aliases(request).items():  # listed as `ollama cp` would list a copy
        if model in by_name and alias not in by_name:
            tag = str(parse_name(alias))
            models.append({**by_name[model], "name": tag, "model": tag})
    local = [str(m["name"]) for m in models]
    models += [listing.ollama_tag(r) for r in listing.routes(request, local)]
    return web.json_response({"models": models})


def _parameters(context: int, stops: list[str] | tuple[str, ...]) -> str:
    """Ollama's Modelfile parameters, one `name value` a line, as clients parse them."""
    lines = [f"num_ctx {context}", *(f"stop {json.dumps(s, ensure_ascii=False)}" for s in stops)]
    return "\n".join(lines)


def _model_info(facts: dict[str, Any], name: str, context: int) -> dict[str, Any]:
    arch = facts["architecture"]
    return {
        "general.architecture": arch,
        "general.basename": facts.get("basename") or name,
        "general.parameter_count": facts["parameters"],
        "general.file_type": facts["quantization"],
        f"{arch}.context_length": context,
        f"{arch}.embedding_length": facts.get("embedding_length", 0),
    }


def _where(request: web.Request, name: str) -> dict[str, Any] | None:
    """Where the model lives while it is loaded: its device, its GPU layers, its split."""
    manager = request.app.get(MANAGER)
    model = manager.get(name) if manager is not None else None
    if model is None:
        return None
    placement = model.placement
    return {
        "device": model.device,
        "gpu_layers": placement.gpu_layers,
        "layers": placement.max_layers,
        "size": placement.total,
        "split": {pool: need.total for pool, need in placement.need.items()},
    }


async def show(request: web.Request, target: Route | None) -> web.Response:
    name = wire.NAME.read(await read_json(request))["model"]
    if target is not None:
        return web.json_response(listing.ollama_show(target))
    name = model_named(request, name)
    served = request.app[MANAGER].known.get(canonical_name(name))
    manifest, facts = await _off_loop(model_library(request).show, name, served)
    template = facts.pop("chat_template", None) or ""
    capabilities = list(facts.get("capabilities") or ["completion"])
    if "insert" in capabilities and facts.get("fim_tokens"):
        # Continue turns fill-in-the-middle on only when the template mentions .Suffix.
        template = fim.show_template(template, tuple(facts["fim_tokens"]))
    context = await context_length(request, manifest.name.short)
    return web.json_response(
        {
            "license": facts.get("license") or "",
            "modelfile": f"# localserve: {manifest.name}\nFROM {manifest.source}\n",
            "parameters": _parameters(context, facts.get("stop_tokens") or ()),
            "template": template,
            "details": _details(manifest),
            "model_info": _model_info(facts, manifest.name.short, context),
            "capabilities": capabilities,
            "modified_at": _iso(manifest.created_at),
            "localserve": {
                "name": manifest.name.short,
                "source": manifest.source,
                "revision": manifest.revision,
                "embedded": manifest.embedded,
                "size": manifest.size,
                "files": [f.path for f in manifest.files],
                **facts,
                "loaded": _where(request, manifest.name.short),
            },
        }
    )


async def pull(request: web.Request) -> web.StreamResponse:
    got = wire.PULL.read(await read_json(request))
    name, stream = model_named(request, got["model"]), got["stream"]
    library = model_library(request)
    served = _served(request)
    # Refuse a bad or unknown name with its own status, before any stream starts.
    await _off_loop(_check_pullable, library, name, served)
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue[dict[str, Any] | None] = asyncio.Queue()
    cancelled = threading.Event()
    pulls: dict[str, dict[str, Any]] = request.app[PULLS]
    pulls[name] = {"model": name, "status": "pulling manifest"}

    def progress(event: dict[str, Any]) -> None:
        shown = {k: event[k] for k in _PROGRESS if event.get(k) is not None}
        pulls[name] = {"model": name, **shown}
        queue.put_nowait(event)

    def report(event: dict[str, Any]) -> None:
        if cancelled.is_set():
            raise PullCancelled()
        loop.call_soon_threadsafe(progress, event)

    def done(_: object) -> None:
        pulls.pop(name, None)
        queue.put_nowait(None)

    task = loop.run_in_executor(None, library.pull, name, report, served)
    task.add_done_callback(lambda _: loop.call_soon_threadsafe(done, None))
    try:
        if not stream:
            await asyncio.shield(task)
            return web.json_response({"status": "success"})
        response = await open_ndjson(request)
        while (event := await queue.get()) is not None:
            await send_line(response, event)
        exc = task.exception()
        if exc is not None:
            await send_line(response, {"error": classify(exc).message})
        await response.write_eof()
        return response
    finally:
        if not task.done():
            cancelled.set()


_PROGRESS = ("status", "completed", "total")


def _check_pullable(library: Library, name: str, served: list[ModelRef]) -> None:
    if looks_like_ref(name):
        parse_ref(name)
        return
    parsed = parse_name(name)
    if library.find(parsed) is None and library.catalog.get(parsed) is None:
        if all(parse_name(ref.name) != parsed for ref in served):
            raise library.not_found(name)


async def delete(request: web.Request) -> web.Response:
    name = wire.NAME.read(await read_json(request))["model"]
    manager = request.app[MANAGER]
    await manager.unload(name)  # a loaded model stops answering before its files go
    await _off_loop(model_library(request).delete, name)
    return web.json_response({})


def _roots(request: web.Request) -> Roots:
    """The folders import and scan may read, resolved: any for this user's CLI (the operator),
    else the models folder and the `import_roots` folders, so that no client can list or take
    files from anywhere else on the machine. The importer proves every path inside them, each
    member of a model folder too, and then reads only the resolved paths it checked."""
    if request.get(OPERATOR):
        return None
    settings = request.app[MANAGER].settings
    roots: list[str | Path] = [model_library(request).store.root, *settings.import_roots]
    return [Path(root).expanduser().resolve() for root in roots]


async def import_(request: web.Request) -> web.Response:
    got = wire.IMPORT.read(await read_json(request))
    path, name, copy = got["path"], got["model"], got["copy"]
    store = model_library(request).store
    manifest = await _off_loop(import_model, store, path, name, copy, _roots(request))
    return web.json_response(
        {
            "model": manifest.name.short,
            "format": manifest.format,
            "size": manifest.size,
            "linked": not copy,
        }
    )


async def scan_(request: web.Request) -> web.Response:
    path = wire.SCAN.read(await read_json(request))["path"]
    found = await _off_loop(scan, path, _roots(request))
    return web.json_response(
        {
            "models": [
                {
                    "path": str(f.path),
                    "size": f.size,
                    "problem": f.problem,
                    **({"facts": f.facts.as_dict()} if f.facts else {}),
                }
                for f in found
            ]
        }
    )


def add_routes(app: web.Application) -> None:
    app[PULLS] = {}
    app.router.add_get("/api/tags", tags)
    app.router.add_post("/api/show", on_model(show, model_name))
    app.router.add_post("/api/pull", pull)
    app.router.add_delete("/api/delete", delete)
    app.router.add_post("/api/admin/import", import_)
    app.router.add_post("/api/admin/scan", scan_)
