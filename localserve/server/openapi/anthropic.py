"""The JSON Schemas of Anthropic's Messages in /openapi.json: each request as
anthropic/request.py reads it and each answer as the face writes it. Fields the reader refuses
are not listed; a body with an unknown field is a 400."""

from __future__ import annotations

from localserve.server.http.validation import MAX_STOP_CHARS, MAX_STOPS
from localserve.server.wire.fields import MODEL, OUTPUT_CAP, PRIORITY, SPECULATIVE
from localserve.server.wire.shapes import (
    FREE_OBJECT,
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

# -- Anthropic ---------------------------------------------------------------------------------

CACHE_CONTROL = nullable({**FREE_OBJECT, "description": "accepted; no effect here"})
A_TEXT = obj(
    {"type": {"const": "text"}, "text": STRING, "cache_control": CACHE_CONTROL}, ("type", "text")
)
A_TOOL_USE = obj(
    {
        "type": {"const": "tool_use"},
        "id": STRING,
        "name": STRING,
        "input": FREE_OBJECT,
        "cache_control": CACHE_CONTROL,
    },
    ("type", "id", "name", "input"),
)
A_TOOL_RESULT = obj(
    {
        "type": {"const": "tool_result"},
        "tool_use_id": STRING,
        "content": one_of(STRING, array(A_TEXT), NULL),
        "is_error": boolean(False),
        "cache_control": CACHE_CONTROL,
    },
    ("type", "tool_use_id"),
)
A_THINKING = obj(
    {"type": {"const": "thinking"}, "thinking": STRING, "signature": STRING}, ("type", "thinking")
)
A_MESSAGE = obj(
    {
        "role": {"enum": ["user", "assistant", "system"]},
        "content": one_of(STRING, array(one_of(A_TEXT, A_TOOL_USE, A_TOOL_RESULT, A_THINKING))),
    },
    ("role", "content"),
)
A_TOOL = obj(
    {
        "name": {"type": "string", "minLength": 1},
        "description": text(),
        "input_schema": {**FREE_OBJECT, "description": "a JSON Schema of the input"},
        "type": {"enum": ["custom", None]},
        "cache_control": CACHE_CONTROL,
        "defer_loading": boolean(
            False, "not offered to the model until a request lists it without this"
        ),
    },
    ("name", "input_schema"),
)
A_TOOL_CHOICE = nullable(
    obj(
        {
            "type": {"enum": ["auto", "any", "tool", "none"]},
            "name": text("with type tool"),
            "disable_parallel_tool_use": boolean(False),
        },
        ("type",),
    )
)
A_THINKING_CONFIG = nullable(
    obj(
        {
            "type": {"enum": ["enabled", "adaptive", "disabled"]},
            "budget_tokens": integer(1, 1 << 30, doc="with enabled: less than max_tokens"),
            "display": text(
                "omitted: thinking blocks come without their text; any other: with all of it"
            ),
        },
        ("type",),
    )
)
A_PROMPT = {
    "model": MODEL,
    "messages": array(A_MESSAGE, minItems=1),
    "system": one_of(
        STRING,
        array(A_TEXT),
        NULL,
        description="a block that is Claude Code's x-anthropic-billing-header line "
        "is left out of the prompt",
    ),
    "tools": nullable(array(A_TOOL)),
    "tool_choice": A_TOOL_CHOICE,
    "thinking": A_THINKING_CONFIG,
    "output_config": nullable(
        obj(
            {
                "effort": {"description": "accepted; no effect here"},
                "format": nullable(
                    obj(
                        {"type": {"const": "json_schema"}, "schema": FREE_OBJECT},
                        ("type", "schema"),
                    )
                ),
            }
        )
    ),
    "cache_control": CACHE_CONTROL,
    "context_management": nullable({**FREE_OBJECT, "description": "accepted; no effect here"}),
}
_A_STOP = {"type": "string", "maxLength": MAX_STOP_CHARS}
MESSAGES_REQUEST = obj(
    {
        **A_PROMPT,
        "max_tokens": integer(1, 1 << 30, doc=OUTPUT_CAP),
        "stop_sequences": nullable(array(_A_STOP, maxItems=MAX_STOPS)),
        "temperature": number(0, 1, 0.8),
        "top_p": number(0, 1, 0.95),
        "top_k": integer(0, 1 << 20, 40),
        "stream": boolean(False),
        "speculative": SPECULATIVE,
        "priority": PRIORITY,
        "metadata": nullable({**FREE_OBJECT, "description": "accepted; no effect here"}),
        **{
            key: text("accepted; no effect here")
            for key in ("service_tier", "speed", "inference_geo", "user_profile_id", "workspace_id")
        },
        "diagnostics": nullable({**FREE_OBJECT, "description": "accepted; no effect here"}),
    },
    ("model", "messages", "max_tokens"),
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

ANTHROPIC_REQUESTS: dict[str, Schema] = {
    "MessagesRequest": MESSAGES_REQUEST,
    "CountTokensRequest": obj(A_PROMPT, ("model", "messages")),
}
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
