"""Where a request's model runs, decided once: `on_model` reads the body as it comes in and
finds the model it names, an upstream's or a local one (server/upstream/forward.py's `route`,
called from here alone), and `run_turn` runs a turn there.

Every handler that names a model is registered through `on_model`, so it is handed the decision
instead of making it. The OpenAI face's byte-for-byte forwarding to an upstream is the one
answer not written from a turn: its body goes as the client sent it (upstream/forward.py).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from typing import Any

from aiohttp import web

from localserve.server.http.readers import read_json
from localserve.server.turn.ask import Answering, Ask
from localserve.server.turn.local import local_turn
from localserve.server.upstream.agents import upstream_turn
from localserve.server.upstream.forward import route
from localserve.server.upstream.registry import Route

JSON = dict[str, Any]
Handler = Callable[[web.Request, Route | None], Awaitable[web.StreamResponse]]


def _model_field(body: JSON) -> Any:
    return body.get("model")


def on_model(
    handler: Handler, name_of: Callable[[JSON], Any] = _model_field
) -> Callable[[web.Request], Awaitable[web.StreamResponse]]:
    """`handler` with the upstream model the body names (`name_of` reads the name), or None
    for a local model or a name no one serves (the local manager then says which)."""

    async def handle(request: web.Request) -> web.StreamResponse:
        body = await read_json(request)
        return await handler(request, route(request, name_of(body)))

    return handle


def run_turn(
    request: web.Request,
    ask: Ask,
    target: Route | None,
    upstream_request: Callable[[Route], JSON],
) -> AbstractAsyncContextManager[Answering]:
    """The turn that answers `ask`: on the local model, or, for an upstream's, the upstream's
    Chat Completions answer to the request `upstream_request` makes from the face's body."""
    if target is None:
        return local_turn(request, ask)
    return upstream_turn(request, target, upstream_request(target))
