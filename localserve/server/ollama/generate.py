"""Ollama's face: /api/generate, /api/chat, /api/version and `/`, wire-compatible with its clients.

Answers stream as NDJSON by default (`"stream": false` for one object); the last object carries
`done_reason` and the timings, in nanoseconds. As in Ollama, a request with no prompt (no
messages) only loads the model, and with `keep_alive: 0` unloads it. The store's endpoints live
in `ollama/store.py`, the embeddings in `server/embeddings.py`, /api/ps in `admin/api.py`.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import replace
from datetime import datetime, timezone
from typing import Any

from aiohttp import web

from localserve import __version__
from localserve.engine.worker_client.resident import ResidentModel
from localserve.ground.errors import BadRequest, EngineError
from localserve.ground.pin import Pin
from localserve.ground.sampling import SamplingParams
from localserve.ground.units import KeepAlive
from localserve.server.chat import fim
from localserve.server.chat.answer_parser import Parsed
from localserve.server.chat.plan import ChatPlan
from localserve.server.http import request_log
from localserve.server.http import validation as v
from localserve.server.http.readers import (
    model_name,
    read_json,
)
from localserve.server.http.state import MANAGER, context_pin
from localserve.server.http.streaming import open_ndjson, send_line
from localserve.server.ollama import template as ollama_template
from localserve.server.ollama.options import (
    CONTEXT_HEADER,
    fit_prompt,
    options_from,
    window,
)
from localserve.server.ollama.turns import fit_turns
from localserve.server.turn.ask import Answering, Ask, whole
from localserve.server.turn.local import Turn, local_turn
from localserve.server.turn.run import on_model
from localserve.server.upstream import translate
from localserve.server.upstream.agents import upstream_turn
from localserve.server.upstream.registry import Route
from localserve.server.wire import ollama as wire

# What /api/version reports: the Ollama API level this face speaks (tools check it to enable
# /api/embed and load/unload by keep_alive; Codex wants 0.13.4 or later for /v1/responses), not
# localserve's own version.
OLLAMA_API_VERSION = "0.13.5"


def created_at() -> str:
    return datetime.now(timezone.utc).isoformat().replace("+00:00", "Z")


def ns(seconds: float) -> int:
    return max(0, int(seconds * 1e9))


def _refuse_unsupported(body: v.JSON, chat: bool) -> None:
    """Fields whose meaning we cannot honour: a clear 400 beats an answer that ignores them."""
    messages = body.get("messages")
    if body.get("images") or (
        chat
        and isinstance(messages, list)
        and any(isinstance(m, dict) and m.get("images") for m in messages)
    ):
        raise BadRequest("images are not supported: the models served here read text", "images")
    if body.get("tools") and not chat:
        raise BadRequest("'tools' are taken by /api/chat, not /api/generate", "tools")
    if body.get("suffix") and chat:
        raise BadRequest("'suffix' is taken by /api/generate, not /api/chat", "suffix")


class OllamaGeneration:
    """One /api/generate or /api/chat request: prompt in, NDJSON (or one object) out."""

    def __init__(self, request: web.Request, chat: bool, target: Route | None) -> None:
        self.request = request
        self.chat = chat
        self.target = target  # an upstream's model, or None for a local one
        self.started = time.monotonic()
        self.load_s = 0.0
        self.context: list[int] | None = None

    async def run(self) -> web.StreamResponse:
        body = await read_json(self.request)
        # Ollama's generate and chat never took the older `name`.
        self.name = model_name(body, accept_name=False)
        if self.target is not None:
            return await self._upstream(body, self.target)
        self.body = body
        self.got = got = (wire.CHAT if self.chat else wire.GENERATE).read(body)
        self.opts = opts = options_from(got)
        stay = got["keep_alive"]
        _refuse_unsupported(body, self.chat)
        pin = await context_pin(self.request, self.name, opts.pin, opts.num_ctx)
        if self._is_empty(got):
            return await self._load_or_unload(stay, pin)
        ask = Ask(
            self.name,
            [],
            opts.params,
            tools=got.get("tools"),
            think=got["think"],
            keep_alive=stay,
            pin=pin,
            prompt=self._prompt,
            prompt_field="messages" if self.chat else "prompt",
            # A raw prompt or a template of the request's own is not the model's: no thinking.
            templated=self.chat or not (got["raw"] or got["template"] or got["suffix"]),
        )
        async with local_turn(self.request, ask) as turn:
            if got["stream"]:
                return await self._stream(turn)
            return await self._collect(turn)

    async def _upstream(self, body: v.JSON, target: Route) -> web.StreamResponse:
        """The upstream's Chat Completions answer (upstream/translate.py makes the request),
        written as a local one is. A load or unload holds nothing of an upstream's here."""
        if not (body.get("messages") if self.chat else body.get("prompt")):
            reason = "unload" if body.get("keep_alive") in (0, "0", "0s") else "load"
            return web.json_response(
                {**self._head(), **self._piece(""), "done": True, "done_reason": reason}
            )
        make = translate.chat_request if self.chat else translate.generate_request
        asked = make(body, target.model.id, target.upstream.name, target.model.context_length)
        async with upstream_turn(self.request, target, asked) as turn:
            return await (self._stream(turn) if asked["stream"] else self._collect(turn))

    def _is_empty(self, got: dict[str, Any]) -> bool:
        if self.chat:
            return not got["messages"]
        # A suffix alone is a fill at the start of a file, not a load.
        return not got["prompt"] and not got["context"] and not got["suffix"]

    async def _load_or_unload(self, stay: KeepAlive, pin: Pin) -> web.Response:
        manager = self.request.app[MANAGER]
        if stay == 0:
            await manager.unload(self.name)
            reason = "unload"
        else:
            async with request_log.held(self.request, self.name, stay, pin):
                pass
            reason = "load"
        return web.json_response(
            {**self._head(), **self._piece(""), "done": True, "done_reason": reason}
        )

    # -- the prompt ---------------------------------------------------------------------------

    async def _prompt(
        self, model: ResidentModel, plan: ChatPlan, params: SamplingParams
    ) -> tuple[list[int] | str, SamplingParams]:
        """The prompt's tokens, fitted to the request's window, and the answer's room in it."""
        self.load_s = time.monotonic() - self.started
        ctx, cut = window(self.opts.num_ctx, model.info.n_ctx_slot)
        if cut is not None:
            request_log.notice(self.request, CONTEXT_HEADER, cut)
        if self.chat:
            tokens = await self._encode_chat(plan, self.got["messages"], ctx)
        else:
            tokens = await self._encode(model, plan, ctx)
        self.context = None if self.chat or self.got["raw"] else tokens
        # The window may be narrower than the slot, so the answer's room is the window's.
        room = replace(
            params,
            max_tokens=params.answer_cap(len(tokens), ctx),
            penalty_last_n=min(params.penalty_last_n, ctx),
        )
        return tokens, room

    async def _encode(self, model: ResidentModel, plan: ChatPlan, ctx: int) -> list[int]:
        got = self.got
        prompt, system, template = got["prompt"] or "", got["system"], got["template"]
        # A suffix: fill-in-the-middle, raw or not (chat/fim.py).
        fill = fim.ollama_fill(self.body)
        if fill is not None:
            tokens = (await fim.encode(model, fill, window=ctx)).tokens
        elif got["raw"]:
            tokens = await model.encode_text(prompt) if prompt else []
        elif template:
            # Off the event loop, as a chat template's rendering (chat/plan.py's `rendered`).
            text = await asyncio.to_thread(ollama_template.render, template, system or "", prompt)
            tokens = await model.encode_text(text)
        else:
            messages = [{"role": "system", "content": system}] if system else []
            messages.append({"role": "user", "content": prompt})
            tokens = await plan.encode(messages)
        tokens = model.check_token_ids(got["context"], "context") + tokens
        return fit_prompt(tokens, ctx, self.opts.num_keep)

    async def _encode_chat(
        self, plan: ChatPlan, messages: list[dict[str, Any]], ctx: int
    ) -> list[int]:
        """As Ollama does, drop the oldest turns (never a system message nor the last one)
        until the conversation fits the window (ollama/turns.py)."""
        tokens = await fit_turns(messages, ctx, plan.encode, plan.model.count_tokens)
        return fit_prompt(tokens, ctx, self.opts.num_keep)

    # -- the answer ---------------------------------------------------------------------------

    def _head(self) -> dict[str, Any]:
        return {"model": self.name, "created_at": created_at()}

    def _piece(self, text: str, answer: Parsed | None = None) -> dict[str, Any]:
        """An answer's piece: its content, and its thinking and tool calls (arguments as an
        object, as Ollama writes them) when it has any."""
        extra: dict[str, Any] = {}
        if answer is not None and answer.thinking:
            extra["thinking"] = answer.thinking
        if self.chat:
            message: dict[str, Any] = {"role": "assistant", "content": text, **extra}
            if answer is not None and answer.calls:
                message["tool_calls"] = [
                    {"function": {"index": c.index, "name": c.name, "arguments": c.arguments}}
                    for c in answer.calls
                ]
            return {"message": message}
        return {"response": text, **extra}

    def _final(self, turn: Answering, answer: Parsed) -> dict[str, Any]:
        body: dict[str, Any] = {
            **self._head(),
            **self._piece(answer.content, answer),
            "done": True,
            "done_reason": "length" if turn.finish_reason == "length" else "stop",
            "total_duration": ns(time.monotonic() - self.started),
        }
        if not isinstance(turn, Turn):  # an upstream's: its counts, no timings of ours
            body.update(prompt_eval_count=turn.prompt_tokens, eval_count=turn.completion_tokens)
            return body
        seq = turn.seq
        timings = seq.timings()
        if self.context is not None:
            body["context"] = self.context + seq.generated
        body.update(
            load_duration=ns(self.load_s),
            prompt_eval_count=seq.prompt_tokens,
            prompt_eval_duration=ns(
                timings.ttft_s if timings.ttft_s is not None else timings.total_s
            ),
            eval_count=seq.completion_tokens,
            eval_duration=ns(timings.decode_s),
        )
        return body

    async def _collect(self, turn: Answering) -> web.Response:
        return web.json_response(self._final(turn, await whole(turn)))

    async def _stream(self, turn: Answering) -> web.StreamResponse:
        response = await open_ndjson(self.request)
        try:
            async for piece in turn.pieces():
                if piece:
                    await send_line(
                        response,
                        {**self._head(), **self._piece(piece.content, piece), "done": False},
                    )
        except EngineError as exc:
            # Ollama's clients raise ResponseError on an object with an "error" key.
            await send_line(response, {"error": str(exc)})
        else:
            await send_line(response, self._final(turn, Parsed()))
        await response.write_eof()
        return response


async def generate(request: web.Request, target: Route | None) -> web.StreamResponse:
    return await OllamaGeneration(request, False, target).run()


async def chat(request: web.Request, target: Route | None) -> web.StreamResponse:
    return await OllamaGeneration(request, True, target).run()


async def version(request: web.Request) -> web.Response:
    return web.json_response({"version": OLLAMA_API_VERSION, "localserve": __version__})


async def root(request: web.Request) -> web.Response:
    # Tools probe `/` (GET or HEAD) to see whether "Ollama" is up; this is its exact answer.
    return web.Response(text="Ollama is running")


def add_routes(app: web.Application) -> None:
    app.router.add_post("/api/generate", on_model(generate))
    app.router.add_post("/api/chat", on_model(chat))
    app.router.add_get("/api/version", version)
    app.router.add_get("/", root)  # aiohttp answers HEAD on every GET route
