"""Ollama's /api/chat and /api/generate for an upstream model: translated to the upstream's
Chat Completions (translate.py) and its answer back, as NDJSON or one object.

The upstream's refusal comes back with its status and its message, in Ollama's shape
(`{"error": "..."}`), which Ollama's clients raise as ResponseError.
"""

from __future__ import annotations

import json
import time
from datetime import datetime, timezone
from typing import Any

from aiohttp import web

from localserve.ground.errors import UpstreamUnavailable
from localserve.server.upstream import translate
from localserve.server.upstream.forward import chunks, error_text, said_error, sent, whole
from localserve.server.upstream.registry import Route


def _now() -> str:
    return datetime.now(timezone.utc).isoformat().replace("+00:00", "Z")


async def _send(out: web.StreamResponse, obj: dict[str, Any]) -> None:
    await out.write(json.dumps(obj).encode() + b"\n")


async def forward(
    request: web.Request, target: Route, body: dict[str, Any], chat: bool
) -> web.StreamResponse:
    started = time.monotonic()
    if not (body.get("messages") if chat else body.get("prompt")):
        # Ollama's load (or unload) request: nothing of an upstream model is held here.
        reason = "unload" if body.get("keep_alive") in (0, "0", "0s") else "load"
        text = translate.piece(chat, "")
        return web.json_response(
            {
                "model": target.name,
                "created_at": _now(),
                **text,
                "done": True,
                "done_reason": reason,
            }
        )
    make = translate.chat_request if chat else translate.generate_request
    asked = make(body, target.model.id, target.upstream.name, target.model.context_length)
    async with sent(request, target, "chat/completions", asked) as response:
        if response.status != 200:
            message = error_text(await response.read(), response.status)
            return web.json_response({"error": message}, status=response.status)
        head = {"model": target.name}
        # Whole, as asked, or as a server that ignores `stream` answers (one NDJSON line then).
        if "text/event-stream" not in response.headers.get("Content-Type", ""):
            completion = await whole(target, response)
            text, counts = translate.answer(chat, completion)
            timing = {"total_duration": int((time.monotonic() - started) * 1e9)}
            return web.json_response({**head, "created_at": _now(), **text, **counts, **timing})
        out = web.StreamResponse(headers={"Content-Type": "application/x-ndjson"})
        await out.prepare(request)
        state = translate.StreamState()
        failure: UpstreamUnavailable | None = None
        try:
            async for event in chunks(target, response):
                said = said_error(event)
                if said is not None:
                    await _send(out, {"error": said})
                    await out.write_eof()
                    return out
                shown = state.chunk(chat, event) if isinstance(event, dict) else None
                if shown is not None:
                    await _send(out, {**head, "created_at": _now(), **shown, "done": False})
        except UpstreamUnavailable as exc:
            failure = exc
        if failure is not None:
            await _send(out, {"error": str(failure)})
        else:
            last, counts = state.last(chat)
            if state.calls:  # the calls in an object of their own, as Ollama streams them
                await _send(out, {**head, "created_at": _now(), **last, "done": False})
                last = translate.piece(chat, "")
            timing = {"total_duration": int((time.monotonic() - started) * 1e9)}
            await _send(out, {**head, "created_at": _now(), **last, **counts, **timing})
        await out.write_eof()
        return out


async def embed(request: web.Request, target: Route, body: dict[str, Any]) -> web.StreamResponse:
    """/api/embed for an upstream model: its /v1/embeddings, the vectors as they come (the
    upstream's, normalized or not as it makes them)."""
    started = time.monotonic()
    asked = translate.embed_request(body, target.model.id, target.upstream.name)
    async with sent(request, target, "embeddings", asked) as response:
        if response.status != 200:
            message = error_text(await response.read(), response.status)
            return web.json_response({"error": message}, status=response.status)
        answer = await whole(target, response)
    data = sorted(answer.get("data") or [], key=lambda d: int(d.get("index", 0)))
    usage = answer.get("usage") or {}
    return web.json_response(
        {
            "model": target.name,
            "embeddings": [d.get("embedding") for d in data],
            "total_duration": int((time.monotonic() - started) * 1e9),
            "load_duration": 0,
            "prompt_eval_count": int(usage.get("prompt_tokens") or 0),
        }
    )
