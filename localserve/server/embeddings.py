"""Embeddings over HTTP: Ollama's /api/embed and legacy /api/embeddings, OpenAI's /v1/embeddings.

All three hand their inputs to the model's batcher in one job (`ResidentModel.embed`), so a
request's inputs share decode calls with each other and with concurrent requests. They differ
in their wire shapes and in two rules:

- normalization: /api/embed and OpenAI return unit vectors; legacy /api/embeddings returns the
  raw pooled vector, as Ollama does;
- an input longer than the context: /api/embed truncates it by default (`truncate: true`, as
  Ollama), OpenAI refuses it with a 400 naming `input`.

All three refuse a request whose inputs are more tokens together than `max_embedding_tokens`
(OpenAI's own 300,000 by default) with a 400 naming it, counted on the tokens as they would be
embedded, once they are tokenized and before any is embedded (server/http/bounds.py).
"""

from __future__ import annotations

import asyncio
import base64
import json
import math
import time
from collections.abc import Callable
from typing import Any

import numpy as np
from aiohttp import web

from localserve.engine.worker_client.resident import ResidentModel
from localserve.ground.errors import BadRequest, ContextOverflow
from localserve.ground.pin import AUTO
from localserve.server.http import bounds, request_log
from localserve.server.http import validation as v
from localserve.server.http.priority import is_background
from localserve.server.http.readers import read_json
from localserve.server.http.state import MANAGER, context_pin
from localserve.server.ollama.options import CONTEXT_HEADER, window
from localserve.server.turn.run import on_model
from localserve.server.upstream import forward as upstream
from localserve.server.upstream import ollama as upstream_ollama
from localserve.server.upstream.registry import Route
from localserve.server.wire import fields, shapes
from localserve.server.wire.declare import Body, Field, boolean, integer, nested, text


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


def _texts_of(body: v.JSON, key: str) -> list[str]:
    return _texts(body.get(key, []), key)


def _encoding(body: v.JSON, key: str) -> str:
    encoding = v.string(body, key) or "float"
    if encoding not in ("float", "base64"):
        raise BadRequest("'encoding_format' must be 'float' or 'base64'", key)
    return encoding


MODEL, KEEP_ALIVE = fields.MODEL_FIELD, fields.KEEP_ALIVE_FIELD
DIMENSIONS = integer(1, 1 << 20)
EMBED = Body(
    "EmbedRequest",
    {
        "model": MODEL,
        "input": Field(shapes.one_of(shapes.STRING, shapes.array(shapes.STRING)), _texts_of),
        "truncate": boolean(True),
        "dimensions": DIMENSIONS,
        "options": nested(Body("EmbedOptions", {"num_ctx": integer(1, 1 << 31)})),
        "keep_alive": KEEP_ALIVE,
    },
    ("model",),
)
EMBEDDINGS = Body(
    "EmbeddingsRequest",
    {"model": MODEL, "prompt": text("empty: only load the model"), "keep_alive": KEEP_ALIVE},
    ("model",),
)
OPENAI_EMBEDDING = Body(
    "OpenAIEmbeddingRequest",
    {
        "model": MODEL,
        "encoding_format": Field(shapes.nullable({"enum": ["float", "base64"]}), _encoding),
        "dimensions": DIMENSIONS,
        # read as the model tokenizes it: text, or token ids below its vocabulary size
        "input": Field(
            shapes.one_of(
                shapes.STRING,
                shapes.array(shapes.STRING, minItems=1),
                fields.TOKEN_IDS,
                shapes.array(fields.TOKEN_IDS, minItems=1),
            )
        ),
    },
    ("model", "input"),
)


# -- Ollama ----------------------------------------------------------------------------------


async def ollama_embed(request: web.Request, target: Route | None) -> web.StreamResponse:
    started = time.monotonic()
    body = await read_json(request)
    if target is not None:
        return await upstream_ollama.embed(request, target, body)
    got = EMBED.read(body)
    name, texts, dimensions = got["model"], got["input"], got["dimensions"]
    num_ctx = got["options"]["num_ctx"]
    pin = await context_pin(request, name, AUTO, num_ctx)
    async with request_log.held(request, name, got["keep_alive"], pin) as model:
        load_s = time.monotonic() - started
        ctx, cut = window(num_ctx, model.info.n_ctx_slot)
        if cut is not None:
            request_log.notice(request, CONTEXT_HEADER, cut)
        within = None if got["truncate"] else ctx  # refused, not cut: floors first
        encoded = await model.encode_texts(texts, within=within) if texts else []
        tokens = _fit(encoded, ctx, got["truncate"])
        bounds.embedding_tokens(tokens, request.app[MANAGER].settings)
        vectors = await model.embed(tokens, is_background(request)) if tokens else []
    total_ns = int((time.monotonic() - started) * 1e9)
    return await _json_in_thread(
        lambda: {
            "model": name,
            "embeddings": [shorten(normalize(vec), dimensions).tolist() for vec in vectors],
            "total_duration": total_ns,
            "load_duration": int(load_s * 1e9),
            "prompt_eval_count": sum(len(t) for t in tokens),
        }
    )


async def ollama_embeddings(request: web.Request) -> web.Response:
    """The legacy endpoint: one prompt, one raw vector; an empty prompt only loads the model."""
    got = EMBEDDINGS.read(await read_json(request))
    prompt = got["prompt"] or ""
    async with request.app[MANAGER].acquire(got["model"], got["keep_alive"]) as model:
        if not prompt:
            return web.json_response({"embedding": []})
        tokens = _fit(await model.encode_texts([prompt], "prompt"), model.info.n_ctx_slot, True)
        bounds.embedding_tokens(tokens, request.app[MANAGER].settings)
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
    return await model.encode_texts(texts, within=model.info.n_ctx_slot)


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
    got = OPENAI_EMBEDDING.read(body)
    name, encoding, dimensions = got["model"], got["encoding_format"], got["dimensions"]
    async with request.app[MANAGER].acquire(name) as model:
        tokens = _fit(await _openai_inputs(model, body.get("input")), model.info.n_ctx_slot, False)
        bounds.embedding_tokens(tokens, request.app[MANAGER].settings)
        vectors = await model.embed(tokens, is_background(request))
    n = sum(len(t) for t in tokens)
    return await _json_in_thread(
        lambda: {
            "object": "list",
            "data": [
                {
                    "object": "embedding",
                    "index": i,
                    "embedding": _encode(shorten(normalize(vec), dimensions), encoding),
                }
                for i, vec in enumerate(vectors)
            ],
            "model": name,
            "usage": {"prompt_tokens": n, "total_tokens": n},
        }
    )


async def _json_in_thread(body: Callable[[], dict[str, Any]]) -> web.Response:
    """`web.json_response` of `body()`, made in a thread, a vector at a time: 2,048 vectors are
    a million floats, about a second of normalizing and writing JSON, which held the event loop
    (issue #57), in one json.dumps as much as on the loop itself, for a call never lets the GIL
    go. One vector's call lets it go within milliseconds."""
    data = await asyncio.to_thread(lambda: _dumps(body()))
    return web.Response(body=data, content_type="application/json")


def _dumps(value: Any) -> bytes:
    """JSON of `value`, each object and list of objects or lists written a member at a time."""
    if isinstance(value, dict):
        members = (json.dumps(k).encode() + b": " + _dumps(v) for k, v in value.items())
        return b"{" + b", ".join(members) + b"}"
    if isinstance(value, list) and value and isinstance(value[0], (dict, list)):
        return b"[" + b", ".join(map(_dumps, value)) + b"]"
    return json.dumps(value).encode()


def add_routes(app: web.Application) -> None:
    app.router.add_post("/api/embed", on_model(ollama_embed))
    app.router.add_post("/api/embeddings", ollama_embeddings)
    app.router.add_post("/v1/embeddings", on_model(openai_embeddings))
