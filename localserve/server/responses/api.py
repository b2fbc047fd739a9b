"""OpenAI's Responses face: POST /v1/responses, GET and DELETE /v1/responses/{id}, as Codex and
the `openai` SDK's `client.responses` speak them (requests are read in responses/request.py,
stored ones kept in responses/store.py).

An answer is output items: `reasoning` (the thinking, as `reasoning_text` content, and as its
summary when one is asked for), `message` with `output_text`, and `function_call` with its
`call_id` and JSON `arguments`. `status` is `completed`, or `incomplete` with
`incomplete_details` when `max_output_tokens` cut it; `usage` gives the prompt's tokens the
prefix cache held as `input_tokens_details.cached_tokens`. Streamed, every event has a
`sequence_number`: `response.created`, `.in_progress`, each item's `.output_item.added`, its
parts and deltas (`.output_text.delta`, `.reasoning_text.delta`,
`.function_call_arguments.delta` and `.done`), `.output_item.done`, then `response.completed`
(or `.incomplete`); `response.failed` if the engine fails mid-way.

An upstream model's answer (server/upstream/agents.py) is written by the same code, and stored
the same way: its turn is an `Answering` too.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

from aiohttp import web

from localserve.ground.errors import EngineError
from localserve.server.chat.answer_blocks import CALL, THINKING, AnswerBlocks, Block
from localserve.server.http.readers import read_json
from localserve.server.http.refused import Refused
from localserve.server.http.streaming import KEEPALIVE_S, open_sse, send_keepalive, send_named
from localserve.server.responses.request import ResponsesRequest, read_request
from localserve.server.responses.store import RESPONSES, ResponseStore
from localserve.server.turn.ask import Answering
from localserve.server.turn.run import on_model, run_turn
from localserve.server.upstream import agent_translate
from localserve.server.upstream.registry import Route


def not_found(response_id: str, param: str | None = None) -> Refused:
    """A response id that names no stored response: a 404, as OpenAI answers."""
    return Refused(
        404,
        f"response '{response_id}' not found: it was not stored, or has expired",
        param,
        "response_not_found",
    )


def _id(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex}"


def usage_of(turn: Answering) -> dict[str, Any]:
    """A finished turn's counts, as the Responses API gives them."""
    return {
        "input_tokens": turn.prompt_tokens,
        "input_tokens_details": {"cached_tokens": turn.cached_tokens},
        "output_tokens": turn.completion_tokens,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": turn.prompt_tokens + turn.completion_tokens,
    }


class Answer:
    """One response, whole or streamed: its items, its object, and what the store keeps."""

    def __init__(self, request: web.Request, req: ResponsesRequest) -> None:
        self.request = request
        self.req = req
        self.id = _id("resp")
        self.created_at = int(time.time())
        self.blocks = AnswerBlocks()
        self.item_ids: dict[int, str] = {}
        self.sequence_number = 0

    # -- items --------------------------------------------------------------------------------

    def item_id(self, block: Block) -> str:
        prefix = {THINKING: "rs", CALL: "fc"}.get(block.kind, "msg")
        return self.item_ids.setdefault(block.index, _id(prefix))

    def item(self, block: Block, done: bool) -> dict[str, Any]:
        status = "completed" if done else "in_progress"
        item_id = self.item_id(block)
        if block.kind == THINKING:
            text = block.text if done else ""
            summary = [{"type": "summary_text", "text": text}] if self.req.summary and done else []
            content = [{"type": "reasoning_text", "text": text}] if done else []
            return {
                "type": "reasoning",
                "id": item_id,
                "summary": summary,
                "content": content,
                "encrypted_content": None,
                "status": status,
            }
        if block.kind == CALL:
            call = block.call
            assert call is not None
            namespace, name = self.req.call_name(call.name)
            item = {
                "type": "function_call",
                "id": item_id,
                "call_id": call.id,
                "name": name,
                "arguments": call.arguments_json if done else "",
                "status": status,
            }
            if namespace is not None:
                item["namespace"] = namespace
            return item
        content = [self.text_part(block.text)] if done else []
        return {
            "type": "message",
            "id": item_id,
            "status": status,
            "role": "assistant",
            "content": content,
        }

    @staticmethod
    def text_part(text: str) -> dict[str, Any]:
        return {"type": "output_text", "text": text, "annotations": [], "logprobs": []}

    # -- the response object ------------------------------------------------------------------

    def body(self, turn: Answering | None, status: str, error: str | None = None) -> dict[str, Any]:
        done = status != "in_progress"
        output = [self.item(b, True) for b in self.blocks.blocks] if done else []
        usage = usage_of(turn) if turn is not None and done else None
        ask, echo = self.req.ask, self.req.echo
        fmt = {"type": "text"} if ask.params.grammar is None else {"type": "json_schema"}
        return {
            "id": self.id,
            "object": "response",
            "created_at": self.created_at,
            "status": status,
            "background": False,
            "error": {"code": "server_error", "message": error} if error else None,
            "incomplete_details": {"reason": "max_output_tokens"}
            if status == "incomplete"
            else None,
            "instructions": self.req.instructions,
            "max_output_tokens": ask.params.max_tokens,
            "model": turn.model_name if turn is not None else ask.model,
            "output": output,
            "parallel_tool_calls": ask.tools.parallel if ask.tools is not None else True,
            "previous_response_id": self.req.previous_id,
            "reasoning": echo.get("reasoning") or {"effort": None, "summary": None},
            "store": self.req.store,
            "temperature": ask.params.temperature,
            "text": {"format": fmt},
            "tool_choice": echo.get("tool_choice") or "auto",
            "tools": echo.get("tools") or [],
            "top_p": ask.params.top_p,
            "truncation": "disabled",
            "usage": usage,
            "user": None,
            "metadata": echo.get("metadata") or {},
        }

    def status(self, turn: Answering) -> str:
        return "incomplete" if turn.finish_reason == "length" else "completed"

    def answered(self, turn: Answering) -> dict[str, Any]:
        """The response object once the answer is whole, stored if the request asked."""
        body = self.body(turn, self.status(turn))
        if self.req.store:
            store = self.request.app[RESPONSES]
            store.put(self.id, self.conversation(), body)
        return body

    def conversation(self) -> list[dict[str, Any]]:
        """The messages before this answer and the answer, as a follow-up continues them."""
        answer: dict[str, Any] = {
            "role": "assistant",
            "content": "".join(
                b.text for b in self.blocks.blocks if b.kind not in (THINKING, CALL)
            ),
        }
        thinking = "".join(b.text for b in self.blocks.blocks if b.kind == THINKING)
        if thinking:
            answer["reasoning_content"] = thinking
        calls = self.blocks.calls
        if calls:
            answer["tool_calls"] = [
                {
                    "id": c.id,
                    "type": "function",
                    "function": {"name": c.name, "arguments": c.arguments},
                }
                for c in calls
            ]
        return [*self.req.input, answer]

    # -- whole and streamed -------------------------------------------------------------------

    async def whole(self, turn: Answering) -> web.Response:
        async for piece in turn.pieces():
            self.blocks.feed(piece)
        self.blocks.finish()
        return web.json_response(self.answered(turn))

    async def emit(self, out: web.StreamResponse, event: str, **payload: Any) -> None:
        await send_named(out, event, {**payload, "sequence_number": self.sequence_number})
        self.sequence_number += 1

    async def stream(self, turn: Answering) -> web.StreamResponse:
        response = await open_sse(self.request)
        await self.emit(response, "response.created", response=self.body(turn, "in_progress"))
        await self.emit(response, "response.in_progress", response=self.body(turn, "in_progress"))
        try:
            async for piece in turn.pieces(idle_s=KEEPALIVE_S):
                if piece is None:
                    await send_keepalive(response)
                    continue
                for event in self.blocks.feed(piece):
                    await self._block_event(response, event.kind, event.block, event.text)
            for event in self.blocks.finish():
                await self._block_event(response, event.kind, event.block, event.text)
        except EngineError as exc:
            failed = self.body(turn, "failed", str(exc))
            await self.emit(response, "response.failed", response=failed)
            await response.write_eof()
            return response
        body = self.answered(turn)
        await self.emit(response, f"response.{body['status']}", response=body)
        await response.write_eof()
        return response

    async def _block_event(
        self, response: web.StreamResponse, kind: str, block: Block, text: str
    ) -> None:
        at = {"item_id": self.item_id(block), "output_index": block.index}
        if block.kind == CALL:
            if kind == "start":
                await self.emit(
                    response,
                    "response.output_item.added",
                    output_index=block.index,
                    item=self.item(block, False),
                )
            elif kind == "delta":
                await self.emit(
                    response, "response.function_call_arguments.delta", **at, delta=text
                )
            else:
                item = self.item(block, True)
                await self.emit(
                    response,
                    "response.function_call_arguments.done",
                    **at,
                    arguments=item["arguments"],
                    name=item["name"],
                )
                await self.emit(
                    response, "response.output_item.done", output_index=block.index, item=item
                )
            return
        thinking = block.kind == THINKING
        part = {"type": "reasoning_text", "text": ""} if thinking else self.text_part("")
        names = "reasoning_text" if thinking else "output_text"
        if kind == "start":
            await self.emit(
                response,
                "response.output_item.added",
                output_index=block.index,
                item=self.item(block, False),
            )
            await self.emit(
                response, "response.content_part.added", **at, content_index=0, part=part
            )
        elif kind == "delta":
            extra: dict[str, list[object]] = {} if thinking else {"logprobs": []}
            await self.emit(
                response, f"response.{names}.delta", **at, content_index=0, delta=text, **extra
            )
        else:
            extra = {} if thinking else {"logprobs": []}
            await self.emit(
                response, f"response.{names}.done", **at, content_index=0, text=block.text, **extra
            )
            await self.emit(
                response,
                "response.content_part.done",
                **at,
                content_index=0,
                part={**part, "text": block.text},
            )
            if thinking and self.req.summary:
                summary = {"type": "summary_text", "text": block.text}
                await self.emit(
                    response,
                    "response.reasoning_summary_part.added",
                    **at,
                    summary_index=0,
                    part={**summary, "text": ""},
                )
                await self.emit(
                    response,
                    "response.reasoning_summary_text.delta",
                    **at,
                    summary_index=0,
                    delta=block.text,
                )
                await self.emit(
                    response,
                    "response.reasoning_summary_text.done",
                    **at,
                    summary_index=0,
                    text=block.text,
                )
                await self.emit(
                    response,
                    "response.reasoning_summary_part.done",
                    **at,
                    summary_index=0,
                    part=summary,
                )
            await self.emit(
                response,
                "response.output_item.done",
                output_index=block.index,
                item=self.item(block, True),
            )


def _store(request: web.Request) -> ResponseStore:
    return request.app[RESPONSES]


async def create(request: web.Request, target: Route | None) -> web.StreamResponse:
    body = await read_json(request)
    req = read_request(body)
    if req.previous_id is not None:
        previous = _store(request).get(req.previous_id)
        if previous is None:
            raise not_found(req.previous_id, "previous_response_id")
        req.input = [*previous.conversation, *req.input]
        system = req.ask.messages[:1] if req.instructions else []
        req.ask.messages = [*system, *req.input]
    answer = Answer(request, req)

    def upstream_request(target: Route) -> dict[str, Any]:
        return agent_translate.responses_request(body, req.ask, target.model.id, req.stream)

    async with run_turn(request, req.ask, target, upstream_request) as turn:
        return await (answer.stream(turn) if req.stream else answer.whole(turn))


async def retrieve(request: web.Request) -> web.Response:
    stored = _store(request).get(request.match_info["id"])
    if stored is None:
        raise not_found(request.match_info["id"])
    return web.json_response(stored.body)


async def delete(request: web.Request) -> web.Response:
    response_id = request.match_info["id"]
    if not _store(request).delete(response_id):
        raise not_found(response_id)
    return web.json_response({"id": response_id, "object": "response", "deleted": True})


def add_routes(app: web.Application) -> None:
    app[RESPONSES] = ResponseStore()
    app.router.add_post("/v1/responses", on_model(create))
    app.router.add_get("/v1/responses/{id}", retrieve)
    app.router.add_delete("/v1/responses/{id}", delete)
