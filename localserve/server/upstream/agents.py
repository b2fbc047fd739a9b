"""The agent faces (Anthropic's /v1/messages, OpenAI's /v1/responses) for an upstream model: the
request goes as the upstream's Chat Completions (agent_translate.py), and its answer, streamed
or whole, comes back as the parsed pieces the faces write a local answer from, so each face
writes it with its own code: the same events, items and blocks as for a local model.

The upstream's refusal (a 4xx) comes back with its status and its message, in the face's own
error shape. Unreachable, it is a 503 naming it; cut off mid-stream, the face's error event
(Anthropic's `error`, Responses' `response.failed`), and it counts against its breaker.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
from aiohttp import web

from localserve.ground.errors import EngineError
from localserve.server.chat.answer_parser import Parsed
from localserve.server.http import bounded_json
from localserve.server.http.refused import Refused
from localserve.server.upstream.forward import (
    chunks,
    error_text,
    said_error,
    sent,
    whole,
)
from localserve.server.upstream.registry import Route
from localserve.server.upstream.reply import Reply

JSON = dict[str, Any]


class UpstreamTurn(Reply):
    """An upstream's answer as the faces read a local turn's (turn/ask.py's Answering)."""

    def __init__(self, target: Route, response: aiohttp.ClientResponse, stops: Any) -> None:
        super().__init__(tuple(stops) if isinstance(stops, list) else ())
        self.target = target
        self.response = response

    @property
    def model_name(self) -> str:
        return self.target.name

    async def pieces(self, idle_s: float | None = None) -> AsyncIterator[Parsed | None]:
        # A stalled upstream is cut off by upstream_first_byte_timeout, not kept alive.
        if "text/event-stream" not in self.response.headers.get("Content-Type", ""):
            completion = await whole(self.target, self.response)
            yield self.whole_answer(completion if isinstance(completion, dict) else {})
            return
        async for event in chunks(self.target, self.response):
            said = said_error(event)
            if said is not None:
                raise EngineError(f"upstream '{self.target.upstream.name}': {said}")
            piece = self.chunk(event) if isinstance(event, dict) else None
            if piece:
                yield piece
        yield self.end()


def refusal(raw: bytes, status: int) -> Refused:
    """The upstream's refusal: its status and words, and the `param` and `code` of an OpenAI
    error body (`context_length_exceeded`, ...) where it gave them."""
    try:
        body = bounded_json.loads(raw)
    except ValueError:
        body = None
    error = body.get("error") if isinstance(body, dict) else None
    error = error if isinstance(error, dict) else {}
    param, code = error.get("param"), error.get("code")
    return Refused(
        status,
        error_text(raw, status),
        param if isinstance(param, str) else None,
        code if isinstance(code, str) else None,
    )


@contextlib.asynccontextmanager
async def upstream_turn(
    request: web.Request, target: Route, asked: JSON
) -> AsyncIterator[UpstreamTurn]:
    """The upstream's answer to `asked`, a Chat Completions request; its 4xx raised as the
    face's error with its status and message."""
    async with sent(request, target, "chat/completions", asked) as response:
        if response.status != 200:
            raise refusal(await response.read(), response.status)
        yield UpstreamTurn(target, response, asked.get("stop"))


async def count_tokens(request: web.Request, target: Route, asked: JSON) -> int:
    """The prompt's tokens as the upstream counts them (a one-token answer's usage)."""
    async with upstream_turn(request, target, asked) as turn:
        async for _ in turn.pieces():
            pass
        return turn.prompt_tokens
