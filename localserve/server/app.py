"""The aiohttp application: routes of every API face, one error middleware, and /health."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from aiohttp import web

from localserve import __version__
from localserve.engine.residency.manager import ModelManager
from localserve.ground.upstreams import UpstreamConfig
from localserve.server import embeddings, ui
from localserve.server.admin import api as admin
from localserve.server.anthropic import api as anthropic
from localserve.server.batches import routes as batches
from localserve.server.batches import upload as batch_upload
from localserve.server.http import connections, grammars, guard, metrics, readers, request_log
from localserve.server.http.errors import error_response
from localserve.server.http.state import MANAGER
from localserve.server.llamacpp import infill
from localserve.server.ollama import generate as ollama
from localserve.server.ollama import store
from localserve.server.openai import completions as openai
from localserve.server.openapi import document as openapi
from localserve.server.responses import api as responses
from localserve.server.responses import compact as responses_compact
from localserve.server.upstream.forward import UPSTREAMS
from localserve.server.upstream.gauges import UpstreamGauges
from localserve.server.upstream.registry import Registry

log = logging.getLogger(__name__)

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
CLIENT_LEFT = 499  # nginx's "client closed request", for the request's log line


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
    except ConnectionResetError as exc:
        # The client left, or was given up (server/http/connections.py). Raised on, aiohttp
        # logs it as an error with its traceback (a third of the loop's time under
        # bench_abuse's bodies attack); a response no one will read ends it quietly.
        if request.transport is None or request.transport.is_closing():
            _forget_frames(exc)
            return web.Response(status=CLIENT_LEFT)
        raise
    except Exception as exc:
        return error_response(request, exc)


def _forget_frames(exc: BaseException | None) -> None:
    """Drop the tracebacks of `exc` and of what it was raised during. aiohttp's body reader
    keeps the error it raises, and its traceback keeps the frames that hold the reader: a cycle
    only the collector frees, after the request is long gone. Under bench_abuse's bodies
    attack they were 8,000 frames, and a full collection over them held the loop 0.3 s."""
    while exc is not None:
        exc.__traceback__ = None
        exc = exc.__context__


async def health(request: web.Request) -> web.Response:
    manager = request.app[MANAGER]
    # What the daemon is busy with besides answering: the tray's "Loading X", "Pulling X 40%".
    return web.json_response(
        {
            "status": "ok",
            "version": __version__,
            "models": [m.name for m in manager.models],
            "loading": manager.loading,
            "pulling": list(request.app[store.PULLS].values()),
            "devices": manager.loader.health(),
            "upstreams": request.app[UPSTREAMS].health(),
        }
    )


def build_app(manager: ModelManager, upstreams: tuple[UpstreamConfig, ...] = ()) -> web.Application:
    # The guard runs inside the error middleware, so its refusals leave in each face's shape.
    # Outermost, the request's log line: it sees the status the error middleware gave. The
    # connection table's marks a connection busy (and keeps the operator's reserve) first.
    middlewares = [
        request_log.request_log_middleware,
        errors_middleware,
        connections.connections_middleware,
        guard.guard_middleware,
    ]
    app = web.Application(middlewares=middlewares, client_max_size=64 * 1024 * 1024)
    app[MANAGER] = manager
    settings = manager.settings
    registry = Registry(upstreams, settings)
    app[UPSTREAMS] = registry
    app.on_startup.append(registry.start)
    app.on_cleanup.append(registry.stop)
    guard.install(app, settings)
    connections.install(app, settings)
    request_log.install(app, settings.log_prompts)
    grammars.install(app)
    readers.install(app)
    if not settings.no_metrics:
        metrics.install(app)
        if registry.upstreams:
            app[metrics.METRICS].registry.register(UpstreamGauges(registry))
    app.router.add_get("/health", health)
    openai.add_routes(app)
    anthropic.add_routes(app)
    responses.add_routes(app)
    responses_compact.add_routes(app)
    admin.add_routes(app)
    ollama.add_routes(app)
    embeddings.add_routes(app)
    batches.install(app, settings)
    batch_upload.install(app)
    store.add_routes(app)
    infill.add_routes(app)
    openapi.add_routes(app)
    ui.add_routes(app)
    return app
