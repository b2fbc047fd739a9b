"""Embeddings over HTTP: Ollama's /api/embed and legacy /api/embeddings, OpenAI's /v1/embeddings.

All three hand their inputs to the model's batcher in one job (`ResidentModel.embed`), so a
request's inputs share decode calls with each other and with concurrent requests. They differ
in their wire shapes and in two rules:

- normalization: /api/embed and OpenAI return unit vectors; legacy /api/embeddings returns the
  raw pooled vector, as Ollama does;
- an input longer than the context: /api/embed truncates it by default (`truncate: true`, as
  Ollama), OpenAI refuses it with a 400 naming `input`.
"""

from __future__ import annotations

import base64
import math
import time
from typing import Any

import numpy as np
from aiohttp import web

from localserve.engine.worker_client.resident import ResidentModel
from localserve.ground.errors import BadRequest, ContextOverflow
from localserve.ground.pin import AUTO
from localserve.server.http import request_log
from localserve.server.http import validation as v
from localserve.server.http.priority import is_background
from localserve.server.http.readers import keep_alive, model_name, read_json
from localserve.server.http.state import MANAGER, context_pin
from localserve.server.ollama.options import CONTEXT_HEADER, window
from localserve.server.turn.run import on_model
from localserve.server.upstream import forward as upstream
from localserve.server.upstream import ollama as upstream_ollama
from localserve.server.upstream.registry import Route


# Normalization is the face's business: the engine returns raw pooled vectors.
def normalize(vec: np.ndarray) -> np.ndarray:
    """Unit length (L2), as Ollama's /api/embed and OpenAI return; a zero vector stays zero."""
    norm = float(np.linalg.norm(vec))
    return vec / norm if norm > 0 and math.isfinite(norm) else vec


def shorten(vec: np.ndarray, dimensions: int | None) -> np.ndarray:
    """The first `dimensions` components, renormalized, as `dimensions` asks of both faces."""
    if dimensions is None or dimensions >= len(vec):
        return vec
    return normalize(vec[:dimensions])


def _texts(value: Any, field: str) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, list) and all(isinstance(t, str) for t in value):
        return value
    raise BadRequest(f"'{field}' must be a string or a list of strings", field)


def _fit(tokens: list[list[int]], ctx: int, truncate: bool) -> list[list[int]]:
    too_long = next((t for t in tokens if len(t) > ctx), None)
    if too_long is None:
        return tokens
    if not truncate:
        raise ContextOverflow(len(too_long), ctx, "input")
    return [t[:ctx] for t in tokens]


def _dimensions(body: v.JSON) -> int | None:
    return v.integer(body, "dimensions", None, 1, 1 << 20)


# -- Ollama ----------------------------------------------------------------------------------


async def ollama_embed(request: web.Request, target: Route | None) -> web.StreamResponse:
    started = time.monotonic()
    body = await read_json(request)
    if target is not None:
        return await upstream_ollama.embed(request, target, body)
    name = model_name(body, accept_name=False)
    texts = _texts(body.get("input", []), "input")
    truncate = v.boolean(body, "truncate", True)
    dimensions = _dimensions(body)
    num_ctx = v.integer(v.obj(body, "options"), "num_ctx", None, 1, 1 << 31)
    pin = await context_pin(request, name, AUTO, num_ctx)
    async with request.app[MANAGER].acquire(name, keep_alive(body), pin) as model:
        load_s = time.monotonic() - started
        ctx, cut = window(num_ctx, model.info.n_ctx_slot)
        if cut is not None:
            request_log.notice(request, CONTEXT_HEADER, cut)
        tokens = _fit(await model.encode_texts(texts), ctx, truncate) if texts else []
        vectors = await model.embed(tokens, is_background(request)) if tokens else []
    return web.json_response(
        {
            "model": name,
            "embeddings": [shorten(normalize(vec), dimensions).tolist() for vec in vectors],
            "total_duration": int((time.monotonic() - started) * 1e9),
            "load_duration": int(load_s * 1e9),
            "prompt_eval_count": sum(len(t) for t in tokens),
        }
    )


async def ollama_embeddings(request: web.Request) -> web.Response:
    """The legacy endpoint: one prompt, one raw vector; an empty prompt only loads the model."""
    body = await read_json(request)
    name = model_name(body, accept_name=False)
    prompt = v.string(body, "prompt") or ""
    async with request.app[MANAGER].acquire(name, keep_alive(body)) as model:
        if not prompt:
            return web.json_response({"embedding": []})
        tokens = _fit(await model.encode_texts([prompt], "prompt"), model.info.n_ctx_slot, True)
        (vector,) = await model.embed(tokens, is_background(request))
    return web.json_response({"embedding": vector.tolist()})


# -- OpenAI ----------------------------------------------------------------------------------


async def _openai_inputs(model: ResidentModel, value: Any) -> list[list[int]]:
    """A string, strings, token ids, or lists of token ids, as OpenAI's `input` takes them."""
    if isinstance(value, list) and value and all(_is_token_list(t) for t in value):
        empty = next((i for i, t in enumerate(value) if not t), None)
        if empty is not None:  # llama.cpp cannot decode nothing
            raise BadRequest(f"input {empty} is empty", "input")
        return [model.check_token_ids(list(t), "input") for t in value]
    if _is_token_list(value) and value:
        return [model.check_token_ids(list(value), "input")]
    texts = _texts(value, "input")
    if not texts:
        raise BadRequest("'input' must not be empty", "input")
    return await model.encode_texts(texts)


def _is_token_list(value: Any) -> bool:
    return isinstance(value, list) and all(
        isinstance(t, int) and not isinstance(t, bool) for t in value
    )


def _encode(vec: np.ndarray, encoding: str) -> list[float] | str:
    if encoding == "base64":
        # OpenAI's base64 is the little-endian float32 array, which its clients decode.
        return base64.b64encode(vec.astype("<f4").tobytes()).decode("ascii")
    floats: list[float] = vec.tolist()
    return floats


async def openai_embeddings(request: web.Request, target: Route | None) -> web.StreamResponse:
    body = await read_json(request)
    if target is not None:
        return await upstream.openai(request, target, "embeddings", body)
    name = model_name(body, accept_name=False)
    encoding = v.string(body, "encoding_format") or "float"
    if encoding not in ("float", "base64"):
        raise BadRequest("'encoding_format' must be 'float' or 'base64'", "encoding_format")
    dimensions = _dimensions(body)
    async with request.app[MANAGER].acquire(name) as model:
        tokens = _fit(await _openai_inputs(model, body.get("input")), model.info.n_ctx_slot, False)
        vectors = await model.embed(tokens, is_background(request))
    data = [
        {
            "object": "embedding",
            "index": i,
            "embedding": _encode(shorten(normalize(vec), dimensions), encoding),
        }
        for i, vec in enumerate(vectors)
    ]
    n = sum(len(t) for t in tokens)
    return web.json_response(
        {
            "object": "list",
            "data": data,
            "model": name,
            "usage": {"prompt_tokens": n, "total_tokens": n},
        }
    )


def add_routes(app: web.Application) -> None:
    app.router.add_post("/api/embed", on_model(ollama_embed))
    app.router.add_post("/api/embeddings", ollama_embeddings)
    app.router.add_post("/v1/embeddings", on_model(openai_embeddings))
