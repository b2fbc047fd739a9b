"""The answers of /openapi.json, as each face writes them: OpenAI's, Ollama's, llama.cpp's /infill
and our admin's; every property but the optional ones is always there."""

from __future__ import annotations

from localserve.server.wire.shapes import (
    FREE_OBJECT,
    INT,
    NAT,
    NULL,
    STRING,
    Schema,
    array,
    fixed,
    nullable,
    obj,
    one_of,
    ref,
)

# -- answers -----------------------------------------------------------------------------------


TIMINGS: Schema = {
    k: NAT
    for k in (
        "total_duration",
        "load_duration",
        "prompt_eval_count",
        "prompt_eval_duration",
        "eval_count",
        "eval_duration",
    )
}
TOOL_CALL_OUT = fixed(
    {
        "id": STRING,
        "type": {"const": "function"},
        "function": fixed({"name": STRING, "arguments": STRING}),
    }
)
USAGE = fixed(
    {
        "prompt_tokens": NAT,
        "completion_tokens": NAT,
        "total_tokens": NAT,
        "prompt_tokens_details": fixed({"cached_tokens": NAT}),
    }
)
FINISH = {"enum": ["stop", "length", "tool_calls"]}


def _envelope(kind: str, choice: Schema) -> Schema:
    return fixed(
        {
            "id": STRING,
            "object": {"const": kind},
            "created": INT,
            "model": STRING,
            "system_fingerprint": STRING,
            "choices": array(choice),
            "usage": USAGE,
        },
        "usage",
    )


DETAILS = fixed(
    {
        "parent_model": STRING,
        "format": STRING,
        "family": STRING,
        "families": array(STRING),
        "parameter_size": STRING,
        "quantization_level": STRING,
    },
    "parent_model",
)
LOADED = fixed(
    {
        "name": STRING,
        "model": STRING,
        "size": NAT,
        "size_vram": NAT,
        "digest": STRING,
        "expires_at": STRING,
        # An upstream model's (server/upstream/listing.py): null where its server reports none.
        "context_length": nullable(NAT),
        "details": DETAILS,
        "remote_model": STRING,
        "remote_host": STRING,
        "localserve": FREE_OBJECT,
    },
    "remote_model",
    "remote_host",
)
OLLAMA_MESSAGE = fixed(
    {
        "role": {"const": "assistant"},
        "content": STRING,
        "thinking": STRING,
        "tool_calls": array(
            obj({"function": fixed({"index": NAT, "name": STRING, "arguments": FREE_OBJECT})})
        ),
    },
    "thinking",
    "tool_calls",
)
OLLAMA_DONE: Schema = {
    "done": {"const": True},
    "done_reason": {"enum": ["stop", "length", "load", "unload"]},
}
OLLAMA_HEAD: Schema = {"model": STRING, "created_at": STRING}

ANSWERS: dict[str, Schema] = {
    "OpenAIError": fixed(
        {
            "error": fixed(
                {
                    "message": STRING,
                    "type": STRING,
                    "param": nullable(STRING),
                    "code": nullable(STRING),
                }
            )
        }
    ),
    "OllamaError": fixed({"error": STRING}),
    "ChatCompletion": _envelope(
        "chat.completion",
        fixed(
            {
                "index": NAT,
                "logprobs": NULL,
                "finish_reason": FINISH,
                "message": fixed(
                    {
                        "role": {"const": "assistant"},
                        "content": nullable(STRING),
                        "reasoning_content": STRING,
                        "tool_calls": array(TOOL_CALL_OUT),
                    },
                    "reasoning_content",
                    "tool_calls",
                ),
            }
        ),
    ),
    "Completion": _envelope(
        "text_completion",
        fixed(
            {
                "index": NAT,
                "text": STRING,
                "logprobs": NULL,
                "finish_reason": FINISH,
            }
        ),
    ),
    "ModelList": fixed(
        {
            "object": {"const": "list"},
            "data": array(ref("ModelEntry")),
            "has_more": {"const": False},
            "first_id": nullable(STRING),
            "last_id": nullable(STRING),
        }
    ),
    # OpenAI's fields, then Anthropic's: both SDKs list models at /v1/models.
    "ModelEntry": fixed(
        {
            "id": STRING,
            "object": {"const": "model"},
            "created": INT,
            "owned_by": STRING,
            "context_length": nullable(NAT),
            "type": {"const": "model"},
            "display_name": STRING,
            "created_at": STRING,
            "remote": FREE_OBJECT,
        },
        "remote",
    ),
    "OpenAIEmbeddings": fixed(
        {
            "object": {"const": "list"},
            "model": STRING,
            "data": array(
                fixed(
                    {
                        "object": {"const": "embedding"},
                        "index": NAT,
                        "embedding": one_of(array({"type": "number"}), STRING),
                    }
                )
            ),
            "usage": fixed({"prompt_tokens": NAT, "total_tokens": NAT}),
        }
    ),
    "Embed": fixed(
        {
            "model": STRING,
            "embeddings": array(array({"type": "number"})),
            "total_duration": NAT,
            "load_duration": NAT,
            "prompt_eval_count": NAT,
        }
    ),
    "Embeddings": fixed({"embedding": array({"type": "number"})}),
    "Generated": fixed(
        {
            **OLLAMA_HEAD,
            "response": STRING,
            "thinking": STRING,
            **OLLAMA_DONE,
            "context": array(NAT),
            **TIMINGS,
        },
        "thinking",
        "context",
        *TIMINGS,
    ),
    "Chatted": fixed(
        {**OLLAMA_HEAD, "message": OLLAMA_MESSAGE, **OLLAMA_DONE, **TIMINGS}, *TIMINGS
    ),
    "Infilled": obj(
        {
            "index": NAT,
            "content": STRING,
            "stop": {"type": "boolean"},
            "model": STRING,
            "tokens_predicted": NAT,
            "tokens_evaluated": NAT,
            "tokens_cached": NAT,
            "generation_settings": FREE_OBJECT,
            "has_new_line": {"type": "boolean"},
            "truncated": {"type": "boolean"},
            "stop_type": {"enum": ["eos", "word", "limit"]},
            "stopping_word": STRING,
            "timings": FREE_OBJECT,
        },
        description="llama.cpp's /completion shape; with response_fields, only those named",
    ),
    "Version": fixed({"version": STRING, "localserve": STRING}),
    "Tags": fixed(
        {
            "models": array(
                fixed(
                    {
                        "name": STRING,
                        "model": STRING,
                        "modified_at": STRING,
                        "size": NAT,
                        "digest": STRING,
                        "details": DETAILS,
                        "remote_model": STRING,
                        "remote_host": STRING,
                        "localserve": FREE_OBJECT,
                    },
                    "remote_model",
                    "remote_host",
                    "localserve",
                )
            )
        }
    ),
    "Show": fixed(
        {
            "license": STRING,
            "modelfile": STRING,
            "parameters": STRING,
            "template": STRING,
            "details": DETAILS,
            "model_info": FREE_OBJECT,
            "capabilities": array(STRING),
            "modified_at": STRING,
            "remote_model": STRING,
            "remote_host": STRING,
            "localserve": FREE_OBJECT,
        },
        "remote_model",
        "remote_host",
    ),
    "Status": fixed({"status": STRING}),
    "Imported": fixed(
        {"model": STRING, "format": STRING, "size": NAT, "linked": {"type": "boolean"}}
    ),
    "Scanned": fixed(
        {
            "models": array(
                fixed(
                    {
                        "path": STRING,
                        "size": NAT,
                        "problem": nullable(STRING),
                        "facts": FREE_OBJECT,
                    },
                    "facts",
                )
            )
        }
    ),
    "Loaded": fixed({"models": array(LOADED)}),
    "LoadedModel": LOADED,
    "Stats": fixed(
        {
            "pools": array(FREE_OBJECT),
            "pid": INT,
            "load_counts": {"type": "object", "additionalProperties": NAT},
        }
    ),
    "Unloading": fixed({"model": STRING, "unloading": {"const": True}}),
    "Pinned": fixed({"model": STRING, "pinned": {"type": "boolean"}}),
    "ShuttingDown": fixed({"status": STRING, "pid": INT}),
    "Health": fixed(
        {
            "status": {"const": "ok"},
            "version": STRING,
            "models": array(STRING),
            "loading": array(STRING),
            "pulling": array(
                {
                    "type": "object",
                    "required": ["model", "status"],
                    "properties": {
                        "model": STRING,
                        "status": STRING,
                        "completed": NAT,
                        "total": NAT,
                    },
                }
            ),
            "devices": {
                "type": "object",
                "additionalProperties": fixed(
                    {
                        "state": {"enum": ["running", "idle", "failed"]},
                        "reason": nullable(STRING),
                        "restarts": NAT,
                        "pid": nullable(INT),
                        "last_cause": nullable(STRING),
                        "sent": {"type": "object", "additionalProperties": NAT},
                        # Where the probe's remedy stands: building, ready, stopped, failed.
                        "native_build": nullable(STRING),
                    },
                    "sent",
                ),
            },
            "upstreams": array(
                fixed(
                    {
                        "name": STRING,
                        "url": STRING,
                        "state": {"enum": ["up", "down", "retrying"]},
                        "breaker": {"enum": ["closed", "open", "half_open"]},
                        "failures": NAT,
                        "last_error": nullable(STRING),
                        "retry_in_s": {"type": "number", "minimum": 0},
                        "models": array(STRING),
                        "in_flight": NAT,
                    }
                )
            ),
        }
    ),
    # One server-sent event (how schemathesis and OpenAPI 3.2's itemSchema read a stream).
    "Event": fixed(
        {
            "data": {
                "type": "string",
                "description": "one JSON chunk; OpenAI's streams end with [DONE]",
            }
        }
    ),
}
