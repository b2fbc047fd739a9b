"""What the aiohttp app holds: the model manager, shared by every API face, and the context
length every face reports."""

from aiohttp import web

from localserve.engine.residency.manager import ModelManager
from localserve.store.library import Library

MANAGER = web.AppKey("manager", ModelManager)


def model_library(request: web.Request) -> Library:
    """The model store the manager resolves names in: the daemon's is always the store's
    Library (the manager itself asks only for the ModelLibrary protocol, which its fakes meet)."""
    found = request.app[MANAGER].library
    if not isinstance(found, Library):
        raise TypeError(f"the daemon's manager holds no model store but {type(found).__name__}")
    return found


def context_length(request: web.Request, name: str) -> int:
    """The context a request for `name` gets: a slot's, as the loaded model reports it, or as
    the settings give it to a model not loaded now. /api/show, /api/ps and /v1/models all give
    this one figure, so a client sizes its prompts to what fits."""
    manager = request.app[MANAGER]
    model = manager.get(name)
    return model.info.n_ctx_slot if model is not None else manager.settings.ctx
