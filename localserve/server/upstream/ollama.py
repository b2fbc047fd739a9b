"""Ollama's /api/embed for an upstream model: translated to the upstream's Embeddings
(translate.py). Its /api/chat and /api/generate run as turns (ollama/generate.py).

The upstream's refusal comes back with its status and its message, in Ollama's shape
(`{"error": "..."}`), which Ollama's clients raise as ResponseError.
"""

from __future__ import annotations

import time
from typing import Any

from aiohttp import web

from localserve.server.upstream import translate
from localserve.server.upstream.forward import error_text, sent, whole
from localserve.server.upstream.registry import Route


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
