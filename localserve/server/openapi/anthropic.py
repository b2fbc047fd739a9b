"""The JSON Schemas of Anthropic's Messages answers in /openapi.json, as the face writes them;
its requests are declared in anthropic/request.py."""

from __future__ import annotations

from localserve.server.wire.shapes import (
    FREE_OBJECT,
    NAT,
    STRING,
    Schema,
    array,
    fixed,
    nullable,
    one_of,
)

A_BLOCK_OUT = one_of(
    fixed({"type": {"const": "text"}, "text": STRING}),
    fixed({"type": {"const": "thinking"}, "thinking": STRING, "signature": STRING}),
    fixed({"type": {"const": "tool_use"}, "id": STRING, "name": STRING, "input": FREE_OBJECT}),
)
A_USAGE = fixed(
    {
        "input_tokens": NAT,
        "output_tokens": NAT,
        "cache_read_input_tokens": NAT,
        "cache_creation_input_tokens": NAT,
    }
)

ANTHROPIC_ANSWERS: dict[str, Schema] = {
    "AnthropicError": fixed(
        {"type": {"const": "error"}, "error": fixed({"type": STRING, "message": STRING})}
    ),
    "AnthropicMessage": fixed(
        {
            "id": STRING,
            "type": {"const": "message"},
            "role": {"const": "assistant"},
            "model": STRING,
            "content": array(A_BLOCK_OUT),
            "stop_reason": {"enum": ["end_turn", "max_tokens", "stop_sequence", "tool_use"]},
            "stop_sequence": nullable(STRING),
            "usage": A_USAGE,
        }
    ),
    "TokenCount": fixed({"input_tokens": NAT}),
}
