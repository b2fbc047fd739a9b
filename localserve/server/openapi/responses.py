"""The JSON Schemas of OpenAI's Responses in /openapi.json: each request as responses/request.py
reads it and each answer as the face writes it. Fields the reader refuses are not listed; a
body with an unknown field is a 400."""

from __future__ import annotations

from localserve.server.wire.fields import EFFORT, MODEL, OUTPUT_CAP, PRIORITY, SPECULATIVE
from localserve.server.wire.shapes import (
    FREE_OBJECT,
    INT,
    NAT,
    NULL,
    STRING,
    Schema,
    array,
    boolean,
    fixed,
    integer,
    nullable,
    number,
    obj,
    one_of,
    text,
)

# -- OpenAI's Responses ------------------------------------------------------------------------

R_PART = obj(
    {"type": {"enum": ["input_text", "output_text", "text"]}, "text": STRING}, ("type", "text")
)
R_CONTENT = one_of(STRING, array(R_PART))
R_ITEM = one_of(
    obj(
        {
            "type": {"const": "message"},
            "role": {"enum": ["user", "assistant", "system", "developer"]},
            "content": R_CONTENT,
        },
        ("role", "content"),
    ),
    obj(
        {
            "type": {"const": "function_call"},
            "call_id": STRING,
            "name": STRING,
            "arguments": STRING,
            "namespace": text(),
        },
        ("type", "call_id", "name"),
    ),
    obj(
        {"type": {"const": "function_call_output"}, "call_id": STRING, "output": R_CONTENT},
        ("type", "call_id", "output"),
    ),
    obj(
        {
            "type": {"const": "reasoning"},
            "summary": array(obj({"text": STRING})),
            "content": nullable(array(obj({"text": STRING}))),
        },
        ("type",),
    ),
    obj(
        {"type": {"const": "compaction"}, "id": STRING, "encrypted_content": STRING},
        ("type", "encrypted_content"),
        description="a summary POST /v1/responses/compact made, in place of earlier turns",
    ),
)
R_FUNCTION = obj(
    {
        "type": {"const": "function"},
        "name": {"type": "string", "minLength": 1},
        "description": text(),
        "parameters": nullable(FREE_OBJECT),
        "strict": boolean(),
        "defer_loading": boolean(False),
    },
    ("type", "name"),
)
R_TOOL = one_of(
    R_FUNCTION,
    obj(
        {
            "type": {"const": "namespace"},
            "name": STRING,
            "description": text(),
            "tools": array(R_FUNCTION),
        },
        ("type", "name", "tools"),
    ),
    obj(
        {
            "type": {
                "enum": [
                    "web_search",
                    "web_search_preview",
                    "file_search",
                    "code_interpreter",
                    "image_generation",
                    "mcp",
                    "local_shell",
                ]
            }
        },
        ("type",),
        description="not offered to the model: left out",
    ),
)
RESPONSES_REQUEST = obj(
    {
        "model": MODEL,
        "input": one_of(STRING, array(R_ITEM, minItems=1)),
        "instructions": text("this request's system message"),
        "tools": nullable(array(R_TOOL)),
        "tool_choice": one_of(
            {"enum": ["auto", "none", "required"]},
            obj({"type": {"const": "function"}, "name": STRING}, ("type", "name")),
            NULL,
        ),
        "parallel_tool_calls": boolean(True),
        "max_output_tokens": integer(1, 1 << 30, doc=OUTPUT_CAP),
        "speculative": SPECULATIVE,
        "priority": PRIORITY,
        "temperature": number(0, 2, 0.8),
        "top_p": number(0, 1, 0.95),
        "text": nullable(
            obj(
                {
                    "format": nullable(
                        one_of(
                            obj({"type": {"enum": ["text", "json_object"]}}, ("type",)),
                            obj(
                                {
                                    "type": {"const": "json_schema"},
                                    "name": STRING,
                                    "schema": FREE_OBJECT,
                                    "strict": boolean(),
                                },
                                ("type", "schema"),
                            ),
                        )
                    ),
                    "verbosity": {"description": "accepted; no effect here"},
                }
            )
        ),
        "reasoning": nullable(
            obj(
                {
                    "effort": {
                        **EFFORT,
                        "description": f"{EFFORT['description']}, where the model can",
                    },
                    "summary": nullable({"enum": ["auto", "concise", "detailed"]}),
                }
            )
        ),
        "store": boolean(True, "keep it for previous_response_id"),
        "previous_response_id": text("a stored response to continue"),
        "stream": boolean(False),
        "truncation": nullable({"const": "disabled"}),
        "include": nullable(array(STRING, description="accepted; no effect here")),
        **{
            key: text("accepted; no effect here")
            for key in (
                "prompt_cache_key",
                "prompt_cache_retention",
                "user",
                "safety_identifier",
                "service_tier",
            )
        },
        **{
            key: nullable({**FREE_OBJECT, "description": "accepted; no effect here"})
            for key in ("client_metadata", "metadata", "stream_options")
        },
    },
    ("model", "input"),
)
R_OUTPUT = one_of(
    fixed(
        {
            "type": {"const": "message"},
            "id": STRING,
            "status": STRING,
            "role": {"const": "assistant"},
            "content": array(
                fixed(
                    {
                        "type": {"const": "output_text"},
                        "text": STRING,
                        "annotations": array(FREE_OBJECT),
                        "logprobs": array(FREE_OBJECT),
                    }
                )
            ),
        }
    ),
    fixed(
        {
            "type": {"const": "function_call"},
            "id": STRING,
            "call_id": STRING,
            "name": STRING,
            "arguments": STRING,
            "status": STRING,
            "namespace": STRING,
        },
        "namespace",
    ),
    fixed(
        {
            "type": {"const": "reasoning"},
            "id": STRING,
            "summary": array(FREE_OBJECT),
            "content": array(FREE_OBJECT),
            "encrypted_content": NULL,
            "status": STRING,
        }
    ),
)
R_USAGE = fixed(
    {
        "input_tokens": NAT,
        "input_tokens_details": fixed({"cached_tokens": NAT}),
        "output_tokens": NAT,
        "output_tokens_details": fixed({"reasoning_tokens": NAT}),
        "total_tokens": NAT,
    }
)
RESPONSE = obj(
    {
        "id": STRING,
        "object": {"const": "response"},
        "created_at": INT,
        "status": {"enum": ["completed", "incomplete", "failed", "in_progress"]},
        "model": STRING,
        "output": array(R_OUTPUT),
        "incomplete_details": nullable(fixed({"reason": STRING})),
        "error": nullable(fixed({"code": STRING, "message": STRING})),
        "usage": nullable(R_USAGE),
    },
    ("id", "object", "created_at", "status", "model", "output"),
)

COMPACT_REQUEST = obj(
    {
        "model": MODEL,
        "input": one_of(STRING, array(R_ITEM, minItems=1)),
        "instructions": text("this request's system message"),
        "max_output_tokens": integer(1, 1 << 30, doc="the summary's cap (default 2048)"),
    },
    ("model", "input"),
)
COMPACTED = fixed(
    {
        "id": STRING,
        "object": {"const": "response.compaction"},
        "created_at": INT,
        "output": array(
            one_of(
                fixed(
                    {
                        "type": {"const": "message"},
                        "role": {"const": "user"},
                        "content": array(fixed({"type": {"const": "input_text"}, "text": STRING})),
                    }
                ),
                fixed({"type": {"const": "compaction"}, "id": STRING, "encrypted_content": STRING}),
            )
        ),
        "usage": R_USAGE,
    }
)

RESPONSES_REQUESTS: dict[str, Schema] = {
    "ResponsesRequest": RESPONSES_REQUEST,
    "CompactRequest": COMPACT_REQUEST,
}
RESPONSES_ANSWERS: dict[str, Schema] = {
    "Response": RESPONSE,
    "ResponseCompaction": COMPACTED,
    "ResponseDeleted": fixed(
        {"id": STRING, "object": {"const": "response"}, "deleted": {"const": True}}
    ),
}
