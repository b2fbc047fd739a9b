"""Ollama's /api/chat and /api/generate for an upstream model: translated to the upstream's
Chat Completions (translate.py) and its answer back, as NDJSON or one object.

The upstream's refusal comes back with its status and its message, in Ollama's shape
(`{"error": "..."}`), which Ollama's clients raise as ResponseError.
"""

from __future__ import annotations

import asyncio
import json
import time
from datetime import datetime, timezone
from typing import Any

import aiohttp
from aiohttp import web

from localserve.server.upstream import translate
from localserve.server.upstream.forward import cut_off, events, sent
from localserve.server.upstream.registry import Route


def _now() -> str:
    return datetime.now(timezone.utc).isoformat().replace("+00:00", "Z")


def _error_text(raw: bytes, status: int) -> str:
    """The message of an upstream's error body (OpenAI's, FastAPI's `detail`, or plain text)."""
    try:
        body = json.loads(raw)
    except ValueError:
        return raw.decode("utf-8", errors="replace").strip() or f"status {status}"
    if isinstance(body, dict):
        error = body.get("error")
        if isinstance(error, dict) and error.get("message"):
            return str(error["message"])
        if isinstance(error, str):
            return error
        if "detail" in body:
            return (
                json.dumps(body["detail"])
                if not isinstance(body["detail"], str)
                else body["detail"]
            )
    return json.dumps(body)


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
            message = _error_text(await response.read(), response.status)
            return web.json_response({"error": message}, status=response.status)
        head = {"model": target.name}
        # Whole, as asked, or as a server that ignores `stream` answers (one NDJSON line then).
        if "text/event-stream" not in response.headers.get("Content-Type", ""):
            try:
                completion = await response.json(content_type=None)
            except (aiohttp.ClientError, asyncio.TimeoutError, ValueError) as exc:
                raise cut_off(target, exc) from None
            text, counts = translate.answer(chat, completion)
            timing = {"total_duration": int((time.monotonic() - started) * 1e9)}
            return web.json_response({**head, "created_at": _now(), **text, **counts, **timing})
        out = web.StreamResponse(headers={"Content-Type": "application/x-ndjson"})
        await out.prepare(request)
        state = translate.StreamState()
        done = False
        try:
            async for data in events(response):
                if data == "[DONE]":
                    done = True
                    break
                try:
                    event = json.loads(data)
                except ValueError:
                    continue
                if isinstance(event, dict) and event.get("error"):
                    error = event["error"]
                    said = error.get("message") if isinstance(error, dict) else error
                    await _send(out, {"error": str(said)})
                    await out.write_eof()
                    return out
                shown = state.chunk(chat, event) if isinstance(event, dict) else None
                if shown is not None:
                    await _send(out, {**head, "created_at": _now(), **shown, "done": False})
            failure = None if done else cut_off(target, None)
        except (aiohttp.ClientError, asyncio.TimeoutError) as exc:
            failure = cut_off(target, exc)
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
            message = _error_text(await response.read(), response.status)
            return web.json_response({"error": message}, status=response.status)
        try:
            answer = await response.json(content_type=None)
        except (aiohttp.ClientError, asyncio.TimeoutError, ValueError) as exc:
            raise cut_off(target, exc) from None
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
