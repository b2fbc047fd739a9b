"""The JSON Schemas of OpenAI's Responses answers in /openapi.json, as the face writes them; its
requests are declared in responses/request.py."""

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
)

# -- OpenAI's Responses ------------------------------------------------------------------------

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

RESPONSES_ANSWERS: dict[str, Schema] = {
    "Response": RESPONSE,
    "ResponseCompaction": COMPACTED,
    "ResponseDeleted": fixed(
        {"id": STRING, "object": {"const": "response"}, "deleted": {"const": True}}
    ),
}
