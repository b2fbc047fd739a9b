"""What the aiohttp app holds: the model manager, shared by every API face, and the context
length every face reports."""

import asyncio
from dataclasses import replace
from typing import Protocol, TypeVar

from aiohttp import web

from localserve.engine.residency.loader import grown_ctx, sized
from localserve.engine.residency.manager import ModelManager
from localserve.engine.residency.per_model import aliased
from localserve.ground.model import ModelRef
from localserve.ground.pin import Pin
from localserve.store.library import Library
from localserve.store.resolve import canonical_name

MANAGER = web.AppKey("manager", ModelManager)


class Closable(Protocol):
    def close(self) -> None: ...


C = TypeVar("C", bound=Closable)


def owned(app: web.Application, key: web.AppKey[C], resource: C) -> None:
    """`resource` kept in the app under `key`, and closed with it."""
    app[key] = resource

    async def close(_: web.Application) -> None:
        resource.close()

    app.on_cleanup.append(close)


def model_library(request: web.Request) -> Library:
    """The model store the manager resolves names in: the daemon's is always the store's
    Library (the manager itself asks only for the ModelLibrary protocol, which its fakes meet)."""
    found = request.app[MANAGER].library
    if not isinstance(found, Library):
        raise TypeError(f"the daemon's manager holds no model store but {type(found).__name__}")
    return found


async def context_length(request: web.Request, name: str) -> int:
    """The context a request for `name` gets: a slot's, as the loaded model reports it; for a
    model not loaded now, the settings' `ctx`, or the context it would be fitted to (an
    estimate: a header read, off the event loop). /api/show, /api/ps and /v1/models all give
    this one figure, so a client sizes its prompts to what fits."""
    manager = request.app[MANAGER]
    model = manager.get(name)
    if model is not None:
        return model.info.n_ctx_slot
    if manager.settings.ctx:
        return manager.settings.ctx
    return await asyncio.get_running_loop().run_in_executor(None, _fitted, manager, name)


async def context_pin(request: web.Request, name: str, pin: Pin, asked: int | None) -> Pin:
    """`pin`, asking for a larger context where Ollama's `num_ctx` is above the one `name` runs
    in, as Ollama reloads a model for it (once its running requests end), while the memory
    budget holds the model with it: at least double the context it runs in. `--ctx` pins the
    context: then, as where memory does not allow, the request runs in the loaded context
    (ollama/options.py's window says so)."""
    manager = request.app[MANAGER]
    if asked is None or manager.settings.ctx:
        return pin
    now = await context_length(request, name)
    if asked <= now:
        return pin
    loop = asyncio.get_running_loop()
    # Grown to at least double (or the trained context): a client that climbs num_ctx a step
    # at a time reloads the model a few times, not at every step.
    ctx = await loop.run_in_executor(None, _grown, manager, name, max(asked, 2 * now))
    if ctx < asked:  # double does not fit: what was asked may
        ctx = await loop.run_in_executor(None, _grown, manager, name, asked)
    return replace(pin, ctx=ctx) if ctx > now else pin


def model_named(request: web.Request, name: str) -> str:
    """The model a request's name stands for: the one an alias (`--alias`) names, or itself."""
    return aliased(request.app[MANAGER].settings, name)


def aliases(request: web.Request) -> dict[str, str]:
    """Each alias, by the name it is listed under, with the model it stands for."""
    found = request.app[MANAGER].settings.alias or {}
    return {canonical_name(alias): canonical_name(model) for alias, model in found.items()}


def _ref(manager: ModelManager, name: str) -> ModelRef:
    name = aliased(manager.settings, name)
    return manager.known.get(canonical_name(name)) or manager.library.resolve(name)


def _grown(manager: ModelManager, name: str, asked: int) -> int:
    return grown_ctx(manager.loader, _ref(manager, name), manager.pools.values(), asked)


def _fitted(manager: ModelManager, name: str) -> int:
    return sized(manager.loader, _ref(manager, name), manager.pools.values()).n_ctx_slot
