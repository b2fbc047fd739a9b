"""Ollama's face: /api/generate, /api/chat, /api/version and `/`, wire-compatible with its clients.

Answers stream as NDJSON by default (`"stream": false` for one object); the last object carries
`done_reason` and the timings, in nanoseconds. As in Ollama, a request with no prompt (no
messages) only loads the model, and with `keep_alive: 0` unloads it. The store's endpoints live
in `store_api.py`, the embeddings in `embeddings_api.py`, /api/ps in `admin_api.py`.
"""

from __future__ import annotations

import json
import time
from datetime import datetime, timezone
from typing import Any

from aiohttp import web

from localserve import __version__
from localserve.ground.errors import BadRequest, EngineError
from localserve.ground.units import KeepAlive
from localserve.engine.placement import Pin
from localserve.engine.resident import ResidentModel
from localserve.engine.sequence import Sequence
from localserve.server import ollama_template
from localserve.server import validation as v
from localserve.server.ollama_options import (
    OllamaOptions,
    answer_room,
    fit_prompt,
    options_from,
    window,
)
from localserve.server.requests import chat_messages, keep_alive, model_name, read_json
from localserve.server.state import MANAGER

# What /api/version reports: the Ollama API level this face speaks (tools check it to enable
# /api/embed and load/unload by keep_alive), not localserve's own version.
OLLAMA_API_VERSION = "0.9.0"


def created_at() -> str:
    return datetime.now(timezone.utc).isoformat().replace("+00:00", "Z")


def ns(seconds: float) -> int:
    return max(0, int(seconds * 1e9))


def _refuse_unsupported(body: v.JSON, chat: bool) -> None:
    """Fields whose meaning we cannot honour: a clear 400 beats an answer that ignores them."""
    if body.get("images") or (chat and any(
        isinstance(m, dict) and m.get("images") for m in body.get("messages") or []
    )):
        raise BadRequest("images are not supported: the models served here read text", "images")
    if body.get("tools"):
        raise BadRequest("'tools' is not supported", "tools")
    if body.get("think") not in (None, False):
        raise BadRequest(f"'{body.get('model')}' does not support thinking", "think")
    if body.get("suffix"):
        raise BadRequest("'suffix' (fill-in-the-middle) is not supported", "suffix")


class OllamaGeneration:
    """One /api/generate or /api/chat request: prompt in, NDJSON (or one object) out."""

    def __init__(self, request: web.Request, chat: bool) -> None:
        self.request = request
        self.chat = chat
        self.started = time.monotonic()

    async def run(self) -> web.StreamResponse:
        body = await read_json(self.request)
        # Ollama's generate and chat never took the older `name`.
        self.name = model_name(body, accept_name=False)
        stream = v.boolean(body, "stream", True)
        opts = options_from(body)
        stay = keep_alive(body)
        _refuse_unsupported(body, self.chat)
        if self._is_empty(body):
            return await self._load_or_unload(stay, opts.pin)
        manager = self.request.app[MANAGER]
        async with manager.acquire(self.name, stay, opts.pin) as model:
            self.load_s = time.monotonic() - self.started
            ctx = window(model.name, opts.num_ctx, model.info.n_ctx_slot)
            tokens = await self._encode(model, body, opts, ctx)
            params = answer_room(opts.params, len(tokens), ctx)
            field = "messages" if self.chat else "prompt"
            async with model.generation(tokens, params, field) as seq:
                self.context = None if self.chat or body.get("raw") else tokens
                if stream:
                    return await self._stream(seq)
                return await self._collect(seq)

    def _is_empty(self, body: v.JSON) -> bool:
        if self.chat:
            return not body.get("messages")
        return not v.string(body, "prompt") and not body.get("context")

    async def _load_or_unload(self, stay: KeepAlive, pin: Pin) -> web.Response:
        manager = self.request.app[MANAGER]
        if stay == 0:
            await manager.unload(self.name)
            reason = "unload"
        else:
            async with manager.acquire(self.name, stay, pin):
                pass
            reason = "load"
        return web.json_response({**self._head(), **self._piece(""), "done": True,
                                  "done_reason": reason})

    # -- the prompt ---------------------------------------------------------------------------

    async def _encode(
        self, model: ResidentModel, body: v.JSON, opts: OllamaOptions, ctx: int
    ) -> list[int]:
        if self.chat:
            return await self._encode_chat(model, chat_messages(body), opts, ctx)
        prompt = v.string(body, "prompt") or ""
        system = v.string(body, "system")
        template = v.string(body, "template")
        if v.boolean(body, "raw", False):
            tokens = await model.encode_text(prompt) if prompt else []
        elif template:
            tokens = await model.encode_text(ollama_template.render(template, system or "", prompt))
        else:
            messages = [{"role": "system", "content": system}] if system else []
            messages.append({"role": "user", "content": prompt})
            tokens = await model.encode_chat(messages)
        context = body.get("context") or []
        if not isinstance(context, list) or not all(isinstance(t, int) for t in context):
            raise BadRequest("'context' must be a list of token ids", "context")
        tokens = model.check_token_ids(list(context), "context") + tokens
        if not tokens:
            raise BadRequest("the prompt is empty", "prompt")
        return fit_prompt(tokens, ctx, opts.num_keep)

    async def _encode_chat(
        self, model: ResidentModel, messages: list[dict[str, Any]], opts: OllamaOptions, ctx: int
    ) -> list[int]:
        """As Ollama does, drop the oldest turns (never a system message nor the last one)
        until the conversation fits the window."""
        tokens = await model.encode_chat(messages)
        while len(tokens) >= ctx:
            oldest = next((i for i, m in enumerate(messages[:-1]) if m["role"] != "system"), None)
            if oldest is None:
                break
            messages = messages[:oldest] + messages[oldest + 1 :]
            tokens = await model.encode_chat(messages)
        return fit_prompt(tokens, ctx, opts.num_keep)

    # -- the answer ---------------------------------------------------------------------------

    def _head(self) -> dict[str, Any]:
        return {"model": self.name, "created_at": created_at()}

    def _piece(self, text: str) -> dict[str, Any]:
        if self.chat:
            return {"message": {"role": "assistant", "content": text}}
        return {"response": text}

    def _final(self, seq: Sequence, text: str) -> dict[str, Any]:
        end = seq.finished_at or time.monotonic()
        first = seq.first_token_at or end
        body: dict[str, Any] = {
            **self._head(),
            **self._piece(text),
            "done": True,
            "done_reason": "length" if seq.finish_reason == "length" else "stop",
        }
        if self.context is not None:
            body["context"] = self.context + seq.generated
        body.update(
            total_duration=ns(time.monotonic() - self.started),
            load_duration=ns(self.load_s),
            prompt_eval_count=seq.prompt_tokens,
            prompt_eval_duration=ns(first - seq.created_at),
            eval_count=seq.completion_tokens,
            eval_duration=ns(end - first),
        )
        return body

    async def _collect(self, seq: Sequence) -> web.Response:
        parts: list[str] = []
        async for delta in seq.stream():
            if delta.error:
                raise EngineError(delta.error)
            parts.append(delta.text)
        return web.json_response(self._final(seq, "".join(parts)))

    async def _stream(self, seq: Sequence) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "application/x-ndjson"})
        await response.prepare(self.request)
        async for delta in seq.stream():
            if delta.error:
                # Ollama's clients raise ResponseError on an object with an "error" key.
                await _send(response, {"error": delta.error})
                break
            if delta.text and delta.finish_reason is None:
                await _send(response, {**self._head(), **self._piece(delta.text), "done": False})
            elif delta.finish_reason is not None:
                if delta.text:
                    await _send(response, {**self._head(), **self._piece(delta.text),
                                           "done": False})
                await _send(response, self._final(seq, ""))
        await response.write_eof()
        return response


async def _send(response: web.StreamResponse, obj: dict[str, Any]) -> None:
    await response.write(json.dumps(obj).encode() + b"\n")


async def generate(request: web.Request) -> web.StreamResponse:
    return await OllamaGeneration(request, chat=False).run()


async def chat(request: web.Request) -> web.StreamResponse:
    return await OllamaGeneration(request, chat=True).run()


async def version(request: web.Request) -> web.Response:
    return web.json_response({"version": OLLAMA_API_VERSION, "localserve": __version__})


async def root(request: web.Request) -> web.Response:
    # Tools probe `/` (GET or HEAD) to see whether "Ollama" is up; this is its exact answer.
    return web.Response(text="Ollama is running")


def add_routes(app: web.Application) -> None:
    app.router.add_post("/api/generate", generate)
    app.router.add_post("/api/chat", chat)
    app.router.add_get("/api/version", version)
    app.router.add_get("/", root)  # aiohttp answers HEAD on every GET route
