"""Anthropic's face: POST /v1/messages and /v1/messages/count_tokens, as Claude Code and the
official `anthropic` clients speak them (the request's reading is in anthropic/request.py).

An answer is content blocks (`text`, `thinking`, `tool_use` with its `input` as an object),
a `stop_reason` (`end_turn`, `max_tokens`, `stop_sequence`, `tool_use`) and `usage`, whose
`cache_read_input_tokens` are the prompt's tokens the prefix cache held (Anthropic counts
`input_tokens` without them). Streamed, it is Anthropic's named events: `message_start`, a
`ping`, each block's `content_block_start`, `_delta` (`text_delta`, `thinking_delta`,
`input_json_delta`) and `_stop`, then `message_delta` and `message_stop`; an SSE comment every
KEEPALIVE_S while the prompt prefills (no event may come before `message_start`, which carries
the cached tokens), a `ping` when the answer pauses, and an `error` event if the engine fails.

An upstream model's answer (server/upstream/agents.py) is written by the same code: its turn is
an `Answering` too.
"""

from __future__ import annotations

import uuid
from typing import Any

from aiohttp import web

from localserve.ground.errors import EngineError
from localserve.server.anthropic.request import MessagesRequest, read_request
from localserve.server.chat.answer_blocks import CALL, TEXT, THINKING, AnswerBlocks, Block
from localserve.server.chat.answer_parser import Call
from localserve.server.http.readers import read_json
from localserve.server.http.streaming import KEEPALIVE_S, open_sse, send_keepalive, send_named
from localserve.server.turn.ask import Answering
from localserve.server.turn.local import prompt_tokens
from localserve.server.turn.run import on_model, run_turn
from localserve.server.upstream import agent_translate, agents
from localserve.server.upstream.registry import Route


def tool_use_id(call: Call) -> str:
    return "toolu_" + call.id.removeprefix("call_")


def stop_reason(turn: Answering, calls: list[Call]) -> str:
    if calls:
        return "tool_use"
    if turn.finish_reason == "length":
        return "max_tokens"
    return "stop_sequence" if turn.stop_sequence is not None else "end_turn"


def usage(turn: Answering) -> dict[str, int]:
    return {
        "input_tokens": turn.prompt_tokens - turn.cached_tokens,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": turn.cached_tokens,
        "output_tokens": turn.completion_tokens,
    }


def content_block(block: Block, show_thinking: bool, whole: bool) -> dict[str, Any]:
    """A block as a whole answer holds it, or as its content_block_start opens it."""
    if block.kind == THINKING:
        text = block.text if whole and show_thinking else ""
        return {"type": "thinking", "thinking": text, "signature": ""}
    if block.kind == CALL:
        call = block.call
        assert call is not None
        return {
            "type": "tool_use",
            "id": tool_use_id(call),
            "name": call.name,
            "input": call.arguments if whole else {},
        }
    return {"type": "text", "text": block.text if whole else ""}


class Answer:
    """One /v1/messages answer, whole or streamed."""

    def __init__(self, request: web.Request, req: MessagesRequest) -> None:
        self.request = request
        self.req = req
        self.id = "msg_" + uuid.uuid4().hex[:24]

    def message(self, turn: Answering, content: list[dict[str, Any]], done: bool) -> dict[str, Any]:
        return {
            "id": self.id,
            "type": "message",
            "role": "assistant",
            "model": turn.model_name,
            "content": content,
            "stop_reason": stop_reason(turn, turn.calls) if done else None,
            "stop_sequence": turn.stop_sequence if done else None,
            "usage": usage(turn),
        }

    async def whole(self, turn: Answering) -> web.Response:
        blocks = AnswerBlocks()
        async for piece in turn.pieces():
            blocks.feed(piece)
        blocks.finish()
        content = [content_block(b, self.req.show_thinking, True) for b in blocks.blocks]
        # An answer that said nothing is one empty text block, as Anthropic's are.
        content = content or [content_block(Block(TEXT, 0), True, True)]
        return web.json_response(self.message(turn, content, True))

    async def stream(self, turn: Answering) -> web.StreamResponse:
        response = await open_sse(self.request)
        blocks = AnswerBlocks()
        started = False
        try:
            async for piece in turn.pieces(idle_s=KEEPALIVE_S):
                if piece is None:  # an SSE comment: no event may come before message_start
                    await (
                        send_named(response, "ping", {}) if started else send_keepalive(response)
                    )
                    continue
                if not started:  # after the prefill, when the cached tokens are known
                    await send_named(
                        response, "message_start", {"message": self.message(turn, [], False)}
                    )
                    await send_named(response, "ping", {})
                    started = True
                for event in blocks.feed(piece):
                    await self._send_block_event(response, event.kind, event.block, event.text)
            for event in blocks.finish():
                await self._send_block_event(response, event.kind, event.block, event.text)
        except EngineError as exc:
            error = {"type": "api_error", "message": str(exc)}
            await send_named(response, "error", {"error": error})
            await response.write_eof()
            return response
        delta = {
            "stop_reason": stop_reason(turn, blocks.calls),
            "stop_sequence": turn.stop_sequence,
        }
        await send_named(response, "message_delta", {"delta": delta, "usage": usage(turn)})
        await send_named(response, "message_stop", {})
        await response.write_eof()
        return response

    async def _send_block_event(
        self, response: web.StreamResponse, kind: str, block: Block, text: str
    ) -> None:
        index = block.index
        if kind == "start":
            start = content_block(block, self.req.show_thinking, False)
            await send_named(
                response, "content_block_start", {"index": index, "content_block": start}
            )
        elif kind == "stop":
            await send_named(response, "content_block_stop", {"index": index})
        elif block.kind == THINKING:
            if self.req.show_thinking:
                delta = {"type": "thinking_delta", "thinking": text}
                await send_named(response, "content_block_delta", {"index": index, "delta": delta})
        else:
            delta = (
                {"type": "input_json_delta", "partial_json": text}
                if block.kind == CALL
                else {"type": "text_delta", "text": text}
            )
            await send_named(response, "content_block_delta", {"index": index, "delta": delta})


async def messages(request: web.Request, target: Route | None) -> web.StreamResponse:
    body = await read_json(request)
    req = read_request(body)
    answer = Answer(request, req)

    def upstream_request(target: Route) -> dict[str, Any]:
        model, name = target.model.id, target.upstream.name
        return agent_translate.anthropic_request(body, req.ask, model, name, req.stream)

    async with run_turn(request, req.ask, target, upstream_request) as turn:
        return await (answer.stream(turn) if req.stream else answer.whole(turn))


async def count_tokens(request: web.Request, target: Route | None) -> web.StreamResponse:
    body = await read_json(request)
    req = read_request(body, counting=True)
    if target is None:
        return web.json_response({"input_tokens": await prompt_tokens(request, req.ask)})
    asked = agent_translate.counting_request(body, req.ask, target.model.id, target.upstream.name)
    return web.json_response({"input_tokens": await agents.count_tokens(request, target, asked)})


def add_routes(app: web.Application) -> None:
    app.router.add_post("/v1/messages", on_model(messages))
    app.router.add_post("/v1/messages/count_tokens", on_model(count_tokens))
