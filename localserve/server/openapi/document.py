"""GET /openapi.json: an OpenAPI 3.1 document of every face (OpenAI's, Ollama's, Anthropic's,
OpenAI's Responses), llama.cpp's /infill and our own admin endpoints, written from what the
handlers read and answer (the schemas are in the modules beside this one).

Errors are in each face's shape (server/http/errors.py): OpenAI's `{"error": {message, type, param,
code}}` everywhere but under /api/, where Ollama's `{"error": "..."}` is, and /v1/messages,
where Anthropic's `{"type": "error", "error": {type, message}}` is. A streamed answer is
server-sent events (OpenAI, /infill) or NDJSON (Ollama): its status and shape are decided
before the first byte, so a failure after it is an `error` event or line, not a status.
tests/live/test_openapi.py runs schemathesis against a live daemon with this document.
"""

from __future__ import annotations

from typing import Any

from aiohttp import web

from localserve import __version__
from localserve.server.http import guard
from localserve.server.openapi.answers import ANSWERS
from localserve.server.openapi.anthropic import ANTHROPIC_ANSWERS
from localserve.server.openapi.batches import BATCH_SCHEMAS, batch_paths
from localserve.server.openapi.responses import RESPONSES_ANSWERS
from localserve.server.wire.bodies import DECLARED
from localserve.server.wire.fields import MESSAGE
from localserve.server.wire.shapes import FREE_OBJECT, Schema, ref

OPENAI, OLLAMA, ANTHROPIC = "OpenAIError", "OllamaError", "AnthropicError"
SSE, NDJSON = "text/event-stream", "application/x-ndjson"

_WHY = {
    401: "an API key is required: Authorization: Bearer KEY or X-Api-Key",
    403: "refused: a Host or Origin this server does not serve, a wrong key, a folder (or a "
    "link in it) outside the allowed ones, or a model file's path from a caller that is not "
    "the operator",
    408: "the request body did not arrive in time",
    400: "a bad request: a field's type or range, a prompt longer than a slot's context, a "
    "token id outside the vocabulary; `param` (OpenAI) names the field",
    404: "no model (or stored response, file or batch) of that name",
    409: "the batch has ended: it can no longer be cancelled",
    413: "the request body (or an uploaded file) is too large",
    422: "the hub's files are not a model this server can take",
    500: "the model's file could not be loaded",
    501: "this server was not started to be shut down over HTTP",
    502: "the hub answered with an error, or a download broke off",
    503: "the model's queue is full, it stayed busy, or its engine stopped: retry later",
    504: "the hub cannot be reached",
    507: "the model does not fit its device's memory budget, even with every other model gone",
}
BODY = (400, 408, 413)
NAMED = (*BODY, 404)
RUNS = (*NAMED, 500, 503, 507)  # what may happen to a request that loads or runs a model


def _content(schema: Schema, media_type: str = "application/json") -> dict[str, Any]:
    return {media_type: {"schema": schema}}


def _errors(face: str, statuses: tuple[int, ...]) -> dict[str, Any]:
    return {
        str(status): {"description": _WHY[status], "content": _content(ref(face))}
        for status in sorted(set(statuses))
    }


def op(
    summary: str,
    tag: str,
    answer: str | Schema,
    body: str | None = None,
    errors: tuple[int, ...] = (),
    stream: str | None = None,
    face: str = OPENAI,
    media_type: str = "application/json",
) -> dict[str, Any]:
    """One operation: its JSON body (a request schema's name), its 200 answer (an answer
    schema's name, or a schema), a stream's media type when `stream` may be asked for, and the
    error statuses it answers with in `face`'s shape."""
    content = _content(ref(answer) if isinstance(answer, str) else answer, media_type)
    if stream == SSE:
        content[SSE] = {"schema": ref("Event")}
    elif stream == NDJSON:
        content[NDJSON] = {
            "schema": {
                "type": "string",
                "description": "one JSON object a "
                'line; a failure after the first is an {"error": ...} line',
            }
        }
    described: dict[str, Any] = {
        "summary": summary,
        "tags": [tag],
        "responses": {
            "200": {"description": "the answer", "content": content},
            **_errors(face, errors),
        },
    }
    if body is not None:
        described["requestBody"] = {"required": True, "content": _content(ref(body))}
    return described


def _path_parameter(name: str) -> dict[str, Any]:
    return {"name": name, "in": "path", "required": True, "schema": {"type": "string"}}


def _ollama(
    summary: str,
    answer: str | Schema,
    body: str | None = None,
    errors: tuple[int, ...] = (),
    stream: str | None = None,
    tag: str = "ollama",
) -> dict[str, Any]:
    return op(summary, tag, answer, body, errors, stream, OLLAMA)


def _admin(
    summary: str,
    answer: str,
    body: str | None = None,
    errors: tuple[int, ...] = (),
    stream: str | None = None,
) -> dict[str, Any]:
    return _ollama(summary, answer, body, errors, stream, tag="admin")


PATHS: dict[str, dict[str, Any]] = {
    "/health": {"get": op("whether the daemon is up, its models and devices", "daemon", "Health")},
    "/openapi.json": {"get": op("this document", "daemon", FREE_OBJECT)},
    "/metrics": {
        "get": op(
            "Prometheus' text format: requests, tokens, latency, batching, "
            "residency, pools, prompt caches, workers",
            "daemon",
            {"type": "string"},
            media_type="text/plain",
        )
    },
    # The web page: its files (ui.py), served as they are.
    "/ui": {
        "get": op(
            "the web page: chat, models, live figures",
            "daemon",
            {"type": "string"},
            media_type="text/html",
        )
    },
    "/ui/": {"get": op("the web page", "daemon", {"type": "string"}, media_type="text/html")},
    "/ui/{name}": {
        "get": {
            **op(
                "one of the page's files",
                "daemon",
                {"type": "string"},
                errors=(404,),
                media_type="text/plain",
            ),
            "parameters": [_path_parameter("name")],
        }
    },
    # -- OpenAI
    "/v1/chat/completions": {
        "post": op("a chat answer", "openai", "ChatCompletion", "ChatCompletionRequest", RUNS, SSE)
    },
    "/v1/completions": {
        "post": op(
            "a completion of a prompt, or a fill between prompt and suffix",
            "openai",
            "Completion",
            "CompletionRequest",
            RUNS,
            SSE,
        )
    },
    "/v1/models": {
        "get": op(
            "every model a request may name (OpenAI's and Anthropic's fields)",
            "openai",
            "ModelList",
        )
    },
    "/v1/models/{model}": {
        "get": {
            **op("one model", "openai", "ModelEntry", errors=(404,)),
            "parameters": [_path_parameter("model")],
        }
    },
    # -- Anthropic
    "/v1/messages": {
        "post": op(
            "a chat answer in Anthropic's Messages shape",
            "anthropic",
            "AnthropicMessage",
            "MessagesRequest",
            RUNS,
            SSE,
            ANTHROPIC,
        )
    },
    "/v1/messages/count_tokens": {
        "post": op(
            "the rendered prompt's token count",
            "anthropic",
            "TokenCount",
            "CountTokensRequest",
            RUNS,
            face=ANTHROPIC,
        )
    },
    # -- OpenAI's Responses
    "/v1/responses": {
        "post": op(
            "an answer in OpenAI's Responses shape",
            "responses",
            "Response",
            "ResponsesRequest",
            RUNS,
            SSE,
        )
    },
    "/v1/responses/compact": {
        "post": op(
            "the conversation summarized, in place of its turns",
            "responses",
            "ResponseCompaction",
            "CompactRequest",
            RUNS,
        )
    },
    "/v1/responses/{id}": {
        "get": {
            **op("a stored response", "responses", "Response", errors=(404,)),
            "parameters": [_path_parameter("id")],
        },
        "delete": {
            **op("forget a stored response", "responses", "ResponseDeleted", errors=(404,)),
            "parameters": [_path_parameter("id")],
        },
    },
    "/v1/embeddings": {
        "post": op(
            "unit vectors of the inputs",
            "openai",
            "OpenAIEmbeddings",
            "OpenAIEmbeddingRequest",
            RUNS,
        )
    },
    # -- Ollama
    "/": {"get": op("'Ollama is running'", "ollama", {"type": "string"}, media_type="text/plain")},
    "/api/version": {"get": _ollama("the Ollama API level this face speaks", "Version")},
    "/api/generate": {
        "post": _ollama(
            "a completion; no prompt only loads (keep_alive 0: unloads) the model",
            "Generated",
            "GenerateRequest",
            RUNS,
            NDJSON,
        )
    },
    "/api/chat": {
        "post": _ollama(
            "a chat answer; no messages only loads (keep_alive 0: unloads) the model",
            "Chatted",
            "ChatRequest",
            RUNS,
            NDJSON,
        )
    },
    "/api/embed": {"post": _ollama("unit vectors of the inputs", "Embed", "EmbedRequest", RUNS)},
    "/api/embeddings": {
        "post": _ollama(
            "the raw pooled vector of one prompt (the older endpoint)",
            "Embeddings",
            "EmbeddingsRequest",
            RUNS,
        )
    },
    "/api/tags": {"get": _ollama("the models in the store", "Tags")},
    "/api/show": {"post": _ollama("one model's details", "Show", "NameRequest", NAMED)},
    "/api/ps": {"get": _ollama("the loaded models", "Loaded")},
    # -- the store and residency: they change what is on disk or in memory
    "/api/pull": {
        "post": _admin(
            "download a model (NDJSON progress unless stream is false)",
            "Status",
            "PullRequest",
            (*NAMED, 422, 502, 504),
            NDJSON,
        )
    },
    "/api/delete": {
        "delete": _admin("remove a model from the store", "Empty", "NameRequest", NAMED)
    },
    "/api/admin/import": {
        "post": _admin(
            "register a GGUF file or an ONNX model folder in the store",
            "Imported",
            "ImportRequest",
            BODY,
        )
    },
    "/api/admin/scan": {
        "post": _admin("list the model files under a folder", "Scanned", "ScanRequest", BODY)
    },
    "/api/admin/stats": {"get": _admin("the memory pools and load counts", "Stats")},
    "/api/admin/load": {
        "post": _admin("load a model (and pin it)", "LoadedModel", "LoadRequest", RUNS)
    },
    "/api/admin/unload": {
        "post": _admin("unload a loaded model", "Unloading", "NameRequest", NAMED)
    },
    "/api/admin/pin": {
        "post": _admin(
            "keep a loaded model from eviction, or let it go", "Pinned", "PinRequest", BODY
        )
    },
    "/api/admin/shutdown": {
        "post": _admin("stop the daemon as SIGTERM does", "ShuttingDown", errors=(501,))
    },
    # -- llama.cpp
    "/infill": {
        "post": op(
            "fill in the middle, in llama.cpp's /completion shape (events without [DONE])",
            "llama.cpp",
            "Infilled",
            "InfillRequest",
            RUNS,
            SSE,
        )
    },
}


def _guarded(paths: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """server/http/guard.py answers before any handler: 403 anywhere, 401 where a key is asked."""
    for path, item in paths.items():
        face = OLLAMA if path.startswith("/api/") else OPENAI
        face = ANTHROPIC if path.startswith("/v1/messages") else face
        refusals = (403,) if path in guard.OPEN_PATHS else (401, 403)
        for described in item.values():
            described["responses"].update(_errors(face, refusals))
    return paths


DOCUMENT: dict[str, Any] = {
    "openapi": "3.1.0",
    "info": {
        "title": "localserve",
        "version": __version__,
        "description": "OpenAI's (chat, completions, Responses), Anthropic's (Messages) and "
        "Ollama's HTTP APIs, llama.cpp's /infill and localserve's own admin endpoints, on one "
        "local daemon.",
    },
    "paths": _guarded({**PATHS, **batch_paths(op)}),
    "components": {
        "schemas": {
            "Message": MESSAGE,
            **{body.name: body.schema() for body in DECLARED},
            **ANSWERS,
            **ANTHROPIC_ANSWERS,
            **RESPONSES_ANSWERS,
            **BATCH_SCHEMAS,
            "Empty": {"type": "object"},
        }
    },
}


async def openapi(request: web.Request) -> web.Response:
    return web.json_response(DOCUMENT)


def add_routes(app: web.Application) -> None:
    app.router.add_get("/openapi.json", openapi)
