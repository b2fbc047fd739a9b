"""Residency over HTTP: Ollama's GET /api/ps, and our own load, unload and pin endpoints."""

from __future__ import annotations

import asyncio
import os
from datetime import datetime, timezone
from typing import Any

from aiohttp import web

from localserve.engine.worker_client.resident import ResidentModel
from localserve.formats.memory import sum_estimates
from localserve.ground.errors import BadRequest, ModelNotFound
from localserve.ground.pin import CPU, Pin
from localserve.ground.units import UNSET, parameter_size
from localserve.server.http.guard import GUARD, OPERATOR
from localserve.server.http.readers import read_json
from localserve.server.http.refused import Refused
from localserve.server.http.state import MANAGER
from localserve.server.upstream import listing
from localserve.server.upstream.forward import UPSTREAMS
from localserve.server.wire import store as wire
from localserve.store.library import Library
from localserve.store.resolve import looks_like_path

# Set by the daemon: POST /api/admin/shutdown sets it, and the daemon stops as on SIGTERM.
SHUTDOWN = web.AppKey("shutdown", asyncio.Event)

# Ollama reports a model kept forever as expiring in the far future.
_FOREVER = datetime(2318, 1, 1, tzinfo=timezone.utc).isoformat()


def describe(model: ResidentModel, loads: int, digest: str = "") -> dict[str, Any]:
    """One loaded model in Ollama's /api/ps shape, plus our memory and traffic figures;
    `digest` is the one /api/tags gives it (see `_digests`)."""
    expires = (
        _FOREVER
        if model.expires_at is None or model.in_flight
        else datetime.fromtimestamp(model.expires_at, timezone.utc).isoformat()
    )
    placement = model.placement
    est = sum_estimates(placement.need.values()).as_dict() if placement.need else None
    # Only the continuous batcher keeps a prompt cache; ONNX models' batchers have none.
    traffic = model.runner.stats()
    size = placement.total or model.actual_bytes
    return {
        "name": f"{model.name}:latest",
        "model": f"{model.name}:latest",
        "size": size,
        # What is reserved on GPUs: the split the manager placed, never a guess of our own.
        "size_vram": size - placement.on(CPU) if placement.need else 0,
        "digest": digest.removeprefix("sha256:"),
        "expires_at": expires,
        "context_length": model.info.n_ctx_slot,
        "details": {
            "format": model.info.format,
            "family": model.info.architecture,
            "families": [model.info.architecture],
            "parameter_size": parameter_size(model.info.n_params),
            "quantization_level": model.info.quantization,
        },
        "localserve": {
            "device": model.device,
            "placement": {
                "device": placement.device,
                "gpu_layers": placement.gpu_layers,
                "layers": placement.max_layers,
                "split": {pool: need.as_dict() for pool, need in placement.need.items()},
                "actual": placement.actual(model.buffers),
                "buffers": model.buffers,
            },
            "memory_estimate": est,
            "memory_actual": model.actual_bytes,
            "memory_rss_delta": model.rss_delta,
            "in_flight": model.in_flight,
            "queued": traffic["queued"],
            "running": traffic["running"],
            "pinned": model.pinned,
            "keep_alive_s": model.keep_alive_s,
            "loads": loads,
            "load_seconds": round(model.load_seconds, 3),
            "slots": model.info.n_slots,
            "draft_model": model.draft_model,
            "context_per_slot": model.info.n_ctx_slot,
            "kv_cache_type": model.info.kv_cache_type,
            "flash_attention": model.info.flash_attention,
            "prompt_cache": traffic["prompt_cache"],
        },
    }


async def _digests(request: web.Request, models: list[ResidentModel]) -> list[str]:
    """Each model's digest as /api/tags gives it. Off the event loop: it reads manifests, and
    the first time, hashes a file the store links to (as /api/tags would)."""
    library = request.app[MANAGER].library
    if not isinstance(library, Library):  # a test's fake store lists no digests
        return ["" for _ in models]

    def digests() -> list[str]:
        return [library.served_digest(m.name, m.info.path) for m in models]

    return await asyncio.get_running_loop().run_in_executor(None, digests)


async def ps(request: web.Request) -> web.Response:
    manager = request.app[MANAGER]
    models = manager.models
    digests = await _digests(request, models)
    return web.json_response(
        {
            "models": [
                describe(m, manager.load_counts.get(m.name, 0), digest)
                for m, digest in zip(models, digests)
            ]
            + await _remote_in_flight(request)
        }
    )


async def _remote_in_flight(request: web.Request) -> list[dict[str, Any]]:
    """Upstream models while a request to one is in flight (server/upstream/listing.py)."""
    registry = request.app.get(UPSTREAMS)
    if registry is None or not any(u.in_flight for u in registry.upstreams):
        return []
    return listing.ollama_ps(request, await listing.local_names(request))


async def stats(request: web.Request) -> web.Response:
    manager = request.app[MANAGER]
    return web.json_response(
        {
            "pools": [pool.describe() for pool in manager.pools.values()],
            "load_counts": manager.load_counts,
            "pid": os.getpid(),
        }
    )


async def shutdown(request: web.Request) -> web.StreamResponse:
    """Stop the daemon cleanly: the answer leaves first, then it stops as on SIGTERM."""
    stop = request.app.get(SHUTDOWN)
    if stop is None:
        raise web.HTTPNotImplemented(reason="this server cannot be shut down over HTTP")
    response = web.json_response({"status": "shutting down", "pid": os.getpid()})
    await response.prepare(request)
    await response.write_eof()
    stop.set()
    return response


# Said alike for every path, whatever is there: a file, a folder, a broken model or nothing.
_NO_PATHS = (
    "loading a model by file path takes the localserve CLI on this machine (its operator "
    "token) or the admin key (admin_key); import the file into the store "
    "(localserve import PATH) and load it by name"
)


def may_load_paths(request: web.Request) -> bool:
    """Whether the request may name a file to load: from the operator, or through the admin
    key (with admin_key set the guard let no other caller reach an admin endpoint). Any other
    caller could load, and so probe, any file on the disk, past the import roots."""
    return bool(request.get(OPERATOR)) or request.app[GUARD].admin_key is not None


async def load(request: web.Request) -> web.Response:
    got = wire.LOAD.read(await read_json(request))
    manager = request.app[MANAGER]
    name = got["model"]
    allow_path = may_load_paths(request)
    if not allow_path and looks_like_path(name):
        # Refused before the disk is touched, so the answer tells nothing about the file.
        raise Refused(403, _NO_PATHS, "model")
    stay = got["keep_alive"]
    # Unlike a request's, a load's keep_alive is the daemon's default when it names none.
    model = await manager.preload(
        name, manager.settings.keep_alive if stay is UNSET else stay, _pin(got), allow_path
    )
    if got["pin"]:
        manager.pin(model.name, True)
    (digest,) = await _digests(request, [model])
    return web.json_response(describe(model, manager.load_counts.get(model.name, 0), digest))


def _pin(got: dict[str, Any]) -> Pin:
    """The load's `device` ("cpu", "gpu0") and `num_gpu` (layers on it), as Ollama's option."""
    device, num_gpu = got["device"], got["num_gpu"]
    return Pin(
        device=device.lower() if device else None,
        gpu_layers=None if num_gpu is None or num_gpu < 0 else num_gpu,
    )


async def unload(request: web.Request) -> web.Response:
    name = wire.NAME.read(await read_json(request))["model"]
    if not await request.app[MANAGER].unload(name):
        raise ModelNotFound(name)
    return web.json_response({"model": name, "unloading": True})


async def pin(request: web.Request) -> web.Response:
    got = wire.PIN.read(await read_json(request))
    name, pinned = got["model"], got["pinned"]
    if not request.app[MANAGER].pin(name, pinned):
        raise BadRequest(f"model '{name}' is not loaded; load it before pinning", "model")
    return web.json_response({"model": name, "pinned": pinned})


def add_routes(app: web.Application) -> None:
    app.router.add_get("/api/ps", ps)
    app.router.add_get("/api/admin/stats", stats)
    app.router.add_post("/api/admin/load", load)
    app.router.add_post("/api/admin/unload", unload)
    app.router.add_post("/api/admin/pin", pin)
    app.router.add_post("/api/admin/shutdown", shutdown)
