"""The aiohttp application: routes of every API face, one error middleware, and /health."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from aiohttp import web

from localserve import __version__
from localserve.engine.manager import ModelManager
from localserve.server import (
    admin_api, embeddings_api, guard, infill_api, ollama_api, openai_api, openapi, store_api,
)
from localserve.server.errors import error_response
from localserve.server.state import MANAGER

log = logging.getLogger(__name__)

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@web.middleware
async def errors_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Every failure leaves as a JSON error the client's library understands."""
    try:
        return await handler(request)
    except web.HTTPException as exc:
        if exc.status < 400:
            raise
        return error_response(request, exc)
    except asyncio.CancelledError:
        raise
    except Exception as exc:
        return error_response(request, exc)


async def health(request: web.Request) -> web.Response:
    manager = request.app[MANAGER]
    return web.json_response(
        {"status": "ok", "version": __version__, "models": [m.name for m in manager.models],
         "devices": manager.loader.health()}
    )


def build_app(manager: ModelManager) -> web.Application:
    # The guard runs inside the error middleware, so its refusals leave in each face's shape.
    app = web.Application(middlewares=[errors_middleware, guard.guard_middleware],
                          client_max_size=64 * 1024 * 1024)  # fmt: skip
    app[MANAGER] = manager
    guard.install(app, manager.settings)
    app.router.add_get("/health", health)
    openai_api.add_routes(app)
    admin_api.add_routes(app)
    ollama_api.add_routes(app)
    embeddings_api.add_routes(app)
    store_api.add_routes(app)
    infill_api.add_routes(app)
    openapi.add_routes(app)
    return app
