"""The JSON Schemas of /openapi.json (server/openapi.py): each request body as its handler reads
it (the types and ranges server/http/validation.py checks, the fields it requires) and each answer.

Every optional field also takes JSON null, which the readers treat as not given. Unknown fields
are ignored by the handlers, so no object here forbids more properties.
"""

from __future__ import annotations

from typing import Any

from localserve.server.http.readers import ROLES
from localserve.server.http.validation import MAX_STOP_CHARS, MAX_STOPS

Schema = dict[str, Any]

NO_LIMIT = (1 << 31) - 1  # Ollama's "no limit" for its whole-number options
SEED = (-(1 << 63), (1 << 64) - 1)


# -- helpers -----------------------------------------------------------------------------------


def ref(name: str) -> Schema:
    return {"$ref": f"#/components/schemas/{name}"}


def nullable(schema: Schema) -> Schema:
    """The schema, or null (an optional field's "not given")."""
    kind = schema.get("type")
    if isinstance(kind, str):
        return {**schema, "type": [kind, "null"]}
    return {"anyOf": [schema, {"type": "null"}]}


def _scalar(kind: str, default: Any, doc: str, **more: Any) -> Schema:
    schema: Schema = {"type": [kind, "null"], **more}
    if default is not None:
        schema["default"] = default
    if doc:
        schema["description"] = doc
    return schema


def number(lo: float, hi: float, default: float | None = None, doc: str = "") -> Schema:
    return _scalar("number", default, doc, minimum=lo, maximum=hi)


def integer(lo: int, hi: int, default: int | None = None, doc: str = "") -> Schema:
    return _scalar("integer", default, doc, minimum=lo, maximum=hi)


def boolean(default: bool | None = None, doc: str = "") -> Schema:
    return _scalar("boolean", default, doc)


def text(doc: str = "", **more: Any) -> Schema:
    return _scalar("string", None, doc, **more)


def obj(properties: dict[str, Schema], required: tuple[str, ...] = (), **more: Any) -> Schema:
    schema: Schema = {"type": "object", "properties": properties, **more}
    if required:
        schema["required"] = list(required)
    return schema


def array(items: Schema, **more: Any) -> Schema:
    return {"type": "array", "items": items, **more}


def one_of(*schemas: Schema, **more: Any) -> Schema:
    return {"anyOf": list(schemas), **more}


STRING: Schema = {"type": "string"}
INT: Schema = {"type": "integer"}
NAT: Schema = {"type": "integer", "minimum": 0}
FREE_OBJECT: Schema = {"type": "object"}


# -- what several requests share ---------------------------------------------------------------

MODEL = {"type": "string", "minLength": 1, "description": "a model's name", "examples": ["smollm2"]}
MODEL_OR_NAME = {
    "model": {**MODEL, "description": "the model's name; `name` is taken when it is missing"},
    "name": {**text("the older name of `model`"), "examples": ["smollm2"]},
}
NAMED = {"anyOf": [{"required": ["model"]}, {"required": ["name"]}]}
_SECONDS = r"-?[0-9]+(\.[0-9]+)?"
KEEP_ALIVE = one_of(
    {"type": "number"},
    {"type": "string", "pattern": f"^({_SECONDS}|({_SECONDS}([mM]?[sS]|[mMhH]))+)$"},
    {"type": "null"},
    description="how long the model stays loaded after this request: seconds or a duration "
    'such as "5m" or "1h30m"; 0 unloads it when its requests end; negative, or over 100 '
    "years: for ever",
)
_STOP = {"type": "string", "maxLength": MAX_STOP_CHARS}
STOP = one_of(_STOP, array(_STOP, maxItems=MAX_STOPS), {"type": "null"},
              description="text that ends the answer")
TOKEN_IDS = array(NAT, minItems=1, description="token ids, each below the model's vocabulary size")
TEXT_PART = obj({"type": {"const": "text"}, "text": STRING}, ("type",))
TOOL_CALL_IN = obj(
    {
        "id": text(),
        "type": {"const": "function"},
        "function": obj(
            {"name": STRING, "arguments": one_of(
                {"type": "string", "description": "JSON text (OpenAI)"},
                {"type": "object", "description": "an object (Ollama)"}, {"type": "null"},
            )},  # fmt: skip
            ("name",),
        ),
    },
    ("function",),
)
MESSAGE = obj(
    {
        "role": {"enum": sorted(ROLES)},
        "content": one_of(STRING, array(TEXT_PART), {"type": "null"}),
        "name": text(),
        "tool_calls": nullable(array(TOOL_CALL_IN)),
        "tool_call_id": text("the call a tool message answers"),
        "tool_name": text("the tool that answered (Ollama)"),
    },
    ("role",),
)
MESSAGES = array(ref("Message"), minItems=1)
FUNCTION = obj(
    {"name": {"type": "string", "minLength": 1}, "description": text(),
     "parameters": nullable({**FREE_OBJECT, "description": "a JSON Schema of the arguments"})},
    ("name",),
)  # fmt: skip
TOOLS = nullable(array(obj({"type": {"const": "function"}, "function": FUNCTION}, ("function",)),
                       description="functions the answer may call, each name once"))  # fmt: skip
TOOL_CHOICE = one_of(
    {"enum": ["auto", "none", "required"]},
    obj({"type": {"const": "function"}, "function": obj({"name": STRING}, ("name",))},
        ("function",)),
    {"type": "null"},
    description="a named function must be one of `tools`",
)  # fmt: skip
TOOL_FIELDS = {"tools": TOOLS, "tool_choice": TOOL_CHOICE,
               "parallel_tool_calls": boolean(True)}  # fmt: skip
RESPONSE_FORMAT = one_of(
    obj({"type": {"enum": ["text", "json_object"]}}, ("type",)),
    obj({"type": {"const": "json_schema"},
         "json_schema": obj({"name": STRING, "schema": FREE_OBJECT}, ("schema",))},
        ("type", "json_schema")),
    {"type": "null"},
)  # fmt: skip
TEMPLATE_KWARGS = nullable({
    **FREE_OBJECT, "description": "more variables for the model's chat template",
    "propertyNames": {"not": {"enum": ["messages", "tools", "add_generation_prompt", "bos_token",
                                       "eos_token"]}},
})  # fmt: skip
PENALTIES = {"presence_penalty": number(-2, 2, 0), "frequency_penalty": number(-2, 2, 0)}

# OpenAI's sampling fields, with llama.cpp's top_k, min_p and repeat_penalty.
OPENAI_SAMPLING = {
    "n": integer(1, 1, 1, "only 1"),
    "max_tokens": integer(1, 1 << 30, doc="at most a slot's context (a larger one is a 400)"),
    "max_completion_tokens": integer(1, 1 << 30, doc="max_tokens' newer name, which wins"),
    "logit_bias": nullable({
        "type": "object", "propertyNames": {"pattern": "^[0-9]+$"},
        "additionalProperties": {"type": "number", "minimum": -100, "maximum": 100},
        "description": "a bias for each token id (below the vocabulary size); -100 bans it",
    }),
    "stop": STOP,
    "temperature": number(0, 2, 0.8),
    "top_p": number(0, 1, 0.95),
    "top_k": integer(0, 1 << 20, 40),
    "min_p": number(0, 1, 0.05),
    **PENALTIES,
    "repeat_penalty": number(0, 10, 1),
    "seed": integer(*SEED),
    "response_format": RESPONSE_FORMAT,
    "stream": boolean(False),
    "stream_options": nullable(obj({"include_usage": boolean(False)})),
    "keep_alive": KEEP_ALIVE,
}
OLLAMA_OPTIONS = nullable(obj({
    "num_predict": integer(-2, NO_LIMIT, -1, "-1: until the window is full; -2: fill it"),
    "num_ctx": integer(1, NO_LIMIT, doc="at most a slot's context (a larger one is a 400)"),
    "num_keep": integer(-1, NO_LIMIT, 4),
    "seed": integer(*SEED, default=-1),
    "temperature": number(0, 10, 0.8),
    "top_k": integer(0, NO_LIMIT, 40),
    "top_p": number(0, 1, 0.9),
    "min_p": number(0, 1, 0),
    "repeat_last_n": integer(-1, NO_LIMIT, 64),
    "repeat_penalty": number(0, 10, 1.1),
    **PENALTIES,
    "stop": STOP,
    "num_gpu": integer(-1, NO_LIMIT, -1, "layers on a GPU; -1 leaves it to placement"),
    "main_gpu": integer(0, 255, doc="which GPU, 0 first"),
}))  # fmt: skip
OLLAMA_FORMAT = one_of({"enum": ["json", ""]}, FREE_OBJECT, {"type": "null"},
                       description='"json", or a JSON Schema the answer follows')  # fmt: skip
THINK = one_of({"type": "boolean"}, {"enum": ["high", "medium", "low"]}, {"type": "null"})
OLLAMA_COMMON = {
    "model": MODEL, "stream": boolean(True), "format": OLLAMA_FORMAT, "options": OLLAMA_OPTIONS,
    "think": THINK, "keep_alive": KEEP_ALIVE,
}  # fmt: skip

# -- requests ----------------------------------------------------------------------------------

REQUESTS: dict[str, Schema] = {
    "Message": MESSAGE,
    "ChatCompletionRequest": obj({
        "model": MODEL, "messages": MESSAGES, **OPENAI_SAMPLING, **TOOL_FIELDS,
        "chat_template_kwargs": TEMPLATE_KWARGS,
    }, ("model", "messages")),  # fmt: skip
    "CompletionRequest": obj({
        "model": MODEL,
        "prompt": one_of(STRING, array(STRING, minItems=1, maxItems=1), TOKEN_IDS),
        "suffix": text("fill in the middle between prompt and suffix (a model with FIM tokens)"),
        **OPENAI_SAMPLING,
    }, ("model", "prompt")),  # fmt: skip
    "OpenAIEmbeddingRequest": obj({
        "model": MODEL,
        "input": one_of(STRING, array(STRING, minItems=1), TOKEN_IDS,
                        array(TOKEN_IDS, minItems=1)),  # fmt: skip
        "encoding_format": nullable({"enum": ["float", "base64"]}),
        "dimensions": integer(1, 1 << 20),
    }, ("model", "input")),  # fmt: skip
    "EmbedRequest": obj({
        "model": MODEL, "input": one_of(STRING, array(STRING)),
        "truncate": boolean(True), "dimensions": integer(1, 1 << 20),
        "options": nullable(obj({"num_ctx": integer(1, 1 << 31)})), "keep_alive": KEEP_ALIVE,
    }, ("model",)),  # fmt: skip
    "EmbeddingsRequest": obj({"model": MODEL, "prompt": text("empty: only load the model"),
                              "keep_alive": KEEP_ALIVE}, ("model",)),  # fmt: skip
    "GenerateRequest": obj({
        **OLLAMA_COMMON,
        "prompt": text("no prompt, context nor suffix: only load (or, with keep_alive 0, unload)"),
        "suffix": text(), "system": text(), "template": text("a Go template: .System, .Prompt"),
        "raw": boolean(False), "context": nullable(array(NAT)),
    }, ("model",)),  # fmt: skip
    "ChatRequest": obj({
        **OLLAMA_COMMON, **TOOL_FIELDS,
        "messages": nullable(array(ref("Message"), description="none: only load or unload")),
    }, ("model",)),  # fmt: skip
    "InfillRequest": obj({
        "model": text("the first loaded model when blank"),
        "input_prefix": STRING, "input_suffix": STRING, "prompt": text("text after the prefix"),
        "input_extra": nullable(array(obj({"filename": text(), "text": STRING}, ("text",)))),
        "n_predict": integer(-1, 1 << 30, -1, "0: only prefill"),
        "n_indent": integer(0, 1 << 20, 0), "t_max_predict_ms": integer(-1, 1 << 40, -1),
        "t_max_prompt_ms": integer(-1, 1 << 40, -1), "cache_prompt": boolean(True),
        "temperature": number(0, 10, 0.8), "top_k": integer(0, 1 << 20, 40),
        "top_p": number(0, 1, 0.95), "min_p": number(0, 1, 0.05),
        "repeat_penalty": number(0, 10, 1), **PENALTIES,
        "repeat_last_n": integer(-1, 1 << 20, 64), "seed": integer(-1, (1 << 32) - 1, -1),
        "stop": STOP, "ignore_eos": boolean(False),
        "samplers": one_of(
            {"type": "string", "pattern": "^[ekpmitdysxEKPMITDYSX]*$"},
            array({"enum": ["penalties", "top_k", "top_p", "min_p", "infill", "temperature",
                            "dry", "typ_p", "top_n_sigma", "xtc"]}),
            {"type": "null"}, description="in the order penalties, top_k, top_p, min_p, "
            "infill, temperature"),  # fmt: skip
        "response_fields": nullable(array(STRING)), "stream": boolean(False),
        "keep_alive": KEEP_ALIVE,
    }, ("input_prefix", "input_suffix")),  # fmt: skip
    "NameRequest": obj(MODEL_OR_NAME, **NAMED),
    "PullRequest": obj({**MODEL_OR_NAME, "stream": boolean(True)}, **NAMED),
    "ImportRequest": obj({"path": STRING, "model": text("default: from the file's name"),
                          "copy": boolean(False)}, ("path",)),  # fmt: skip
    "ScanRequest": obj({"path": STRING}, ("path",)),
    "LoadRequest": obj({
        **MODEL_OR_NAME, "keep_alive": KEEP_ALIVE, "device": text(examples=["cpu", "gpu0"]),
        "num_gpu": integer(-1, 1 << 20, -1), "pin": boolean(False),
    }, **NAMED),  # fmt: skip
    "PinRequest": obj({**MODEL_OR_NAME, "pinned": boolean(True)}, **NAMED),
}

# -- answers -----------------------------------------------------------------------------------


def _fixed(properties: dict[str, Schema], *optional: str) -> Schema:
    """An answer's object: every property but the optional ones is always there."""
    return obj(properties, tuple(k for k in properties if k not in optional))


NULL: Schema = {"type": "null"}
TIMINGS = {k: NAT for k in ("total_duration", "load_duration", "prompt_eval_count",
                            "prompt_eval_duration", "eval_count", "eval_duration")}  # fmt: skip
TOOL_CALL_OUT = _fixed({"id": STRING, "type": {"const": "function"},
                        "function": _fixed({"name": STRING, "arguments": STRING})})  # fmt: skip
USAGE = _fixed({"prompt_tokens": NAT, "completion_tokens": NAT, "total_tokens": NAT,
                "prompt_tokens_details": _fixed({"cached_tokens": NAT})})  # fmt: skip
FINISH = {"enum": ["stop", "length", "tool_calls"]}


def _envelope(kind: str, choice: Schema) -> Schema:
    return _fixed({
        "id": STRING, "object": {"const": kind}, "created": INT, "model": STRING,
        "system_fingerprint": STRING, "choices": array(choice), "usage": USAGE,
    }, "usage")  # fmt: skip


DETAILS = _fixed({
    "parent_model": STRING, "format": STRING, "family": STRING, "families": array(STRING),
    "parameter_size": STRING, "quantization_level": STRING,
}, "parent_model")  # fmt: skip
LOADED = _fixed({
    "name": STRING, "model": STRING, "size": NAT, "size_vram": NAT, "digest": STRING,
    "expires_at": STRING, "context_length": NAT, "details": DETAILS, "localserve": FREE_OBJECT,
})  # fmt: skip
OLLAMA_MESSAGE = _fixed({
    "role": {"const": "assistant"}, "content": STRING, "thinking": STRING,
    "tool_calls": array(obj({"function": _fixed({"index": NAT, "name": STRING,
                                                 "arguments": FREE_OBJECT})})),
}, "thinking", "tool_calls")  # fmt: skip
OLLAMA_DONE = {"done": {"const": True},
               "done_reason": {"enum": ["stop", "length", "load", "unload"]}}  # fmt: skip
OLLAMA_HEAD = {"model": STRING, "created_at": STRING}

ANSWERS: dict[str, Schema] = {
    "OpenAIError": _fixed({"error": _fixed({"message": STRING, "type": STRING,
                                            "param": nullable(STRING), "code": nullable(STRING)})}),
    "OllamaError": _fixed({"error": STRING}),
    "ChatCompletion": _envelope("chat.completion", _fixed({
        "index": NAT, "logprobs": NULL, "finish_reason": FINISH,
        "message": _fixed({"role": {"const": "assistant"}, "content": nullable(STRING),
                           "reasoning_content": STRING, "tool_calls": array(TOOL_CALL_OUT)},
                          "reasoning_content", "tool_calls"),
    })),  # fmt: skip
    "Completion": _envelope("text_completion", _fixed({
        "index": NAT, "text": STRING, "logprobs": NULL, "finish_reason": FINISH,
    })),  # fmt: skip
    "ModelList": _fixed({"object": {"const": "list"}, "data": array(ref("ModelEntry")),
                         "has_more": {"const": False}, "first_id": nullable(STRING),
                         "last_id": nullable(STRING)}),  # fmt: skip
    # OpenAI's fields, then Anthropic's: both SDKs list models at /v1/models.
    "ModelEntry": _fixed({
        "id": STRING, "object": {"const": "model"}, "created": INT, "owned_by": STRING,
        "context_length": NAT, "type": {"const": "model"}, "display_name": STRING,
        "created_at": STRING,
    }),  # fmt: skip
    "OpenAIEmbeddings": _fixed({
        "object": {"const": "list"}, "model": STRING,
        "data": array(_fixed({"object": {"const": "embedding"}, "index": NAT,
                              "embedding": one_of(array({"type": "number"}), STRING)})),
        "usage": _fixed({"prompt_tokens": NAT, "total_tokens": NAT}),
    }),  # fmt: skip
    "Embed": _fixed({"model": STRING, "embeddings": array(array({"type": "number"})),
                     "total_duration": NAT, "load_duration": NAT,
                     "prompt_eval_count": NAT}),  # fmt: skip
    "Embeddings": _fixed({"embedding": array({"type": "number"})}),
    "Generated": _fixed({
        **OLLAMA_HEAD, "response": STRING, "thinking": STRING, **OLLAMA_DONE,
        "context": array(NAT), **TIMINGS,
    }, "thinking", "context", *TIMINGS),  # fmt: skip
    "Chatted": _fixed({**OLLAMA_HEAD, "message": OLLAMA_MESSAGE, **OLLAMA_DONE, **TIMINGS},
                      *TIMINGS),  # fmt: skip
    "Infilled": obj({
        "index": NAT, "content": STRING, "stop": {"type": "boolean"}, "model": STRING,
        "tokens_predicted": NAT, "tokens_evaluated": NAT, "tokens_cached": NAT,
        "generation_settings": FREE_OBJECT, "has_new_line": {"type": "boolean"},
        "truncated": {"type": "boolean"}, "stop_type": {"enum": ["eos", "word", "limit"]},
        "stopping_word": STRING, "timings": FREE_OBJECT,
    }, description="llama.cpp's /completion shape; with response_fields, only those named"),
    "Version": _fixed({"version": STRING, "localserve": STRING}),
    "Tags": _fixed({"models": array(_fixed({
        "name": STRING, "model": STRING, "modified_at": STRING, "size": NAT, "digest": STRING,
        "details": DETAILS,
    }))}),  # fmt: skip
    "Show": _fixed({
        "license": STRING, "modelfile": STRING, "parameters": STRING, "template": STRING,
        "details": DETAILS, "model_info": FREE_OBJECT, "capabilities": array(STRING),
        "modified_at": STRING, "localserve": FREE_OBJECT,
    }),  # fmt: skip
    "Status": _fixed({"status": STRING}),
    "Imported": _fixed({"model": STRING, "format": STRING, "size": NAT,
                        "linked": {"type": "boolean"}}),  # fmt: skip
    "Scanned": _fixed({"models": array(_fixed({
        "path": STRING, "size": NAT, "problem": nullable(STRING), "facts": FREE_OBJECT,
    }, "facts"))}),  # fmt: skip
    "Loaded": _fixed({"models": array(LOADED)}),
    "LoadedModel": LOADED,
    "Stats": _fixed({"pools": array(FREE_OBJECT), "pid": INT,
                     "load_counts": {"type": "object", "additionalProperties": NAT}}),
    "Unloading": _fixed({"model": STRING, "unloading": {"const": True}}),
    "Pinned": _fixed({"model": STRING, "pinned": {"type": "boolean"}}),
    "ShuttingDown": _fixed({"status": STRING, "pid": INT}),
    "Health": _fixed({"status": {"const": "ok"}, "version": STRING, "models": array(STRING),
                      "loading": array(STRING),
                      "pulling": array({"type": "object", "required": ["model", "status"],
                                        "properties": {"model": STRING, "status": STRING,
                                                       "completed": NAT, "total": NAT}}),
                      "devices": {"type": "object", "additionalProperties": _fixed({
                          "state": {"enum": ["running", "idle", "failed"]},
                          "reason": nullable(STRING), "restarts": NAT, "pid": nullable(INT),
                          "last_cause": nullable(STRING),
                          "sent": {"type": "object", "additionalProperties": NAT},
                      }, "sent")}}),  # fmt: skip
    # One server-sent event (how schemathesis and OpenAPI 3.2's itemSchema read a stream).
    "Event": _fixed({"data": {"type": "string", "description": "one JSON chunk; OpenAI's "
                              "streams end with [DONE]"}}),  # fmt: skip
}
