"""The JSON Schemas of the parts of Anthropic's Messages requests, which anthropic/request.py
declares its bodies with (server/wire/declare.py)."""

from __future__ import annotations

from localserve.server.http.validation import MAX_STOP_CHARS, MAX_STOPS
from localserve.server.wire.fields import MODEL, OUTPUT_CAP, PRIORITY, SPECULATIVE
from localserve.server.wire.shapes import (
    FREE_OBJECT,
    NULL,
    STRING,
    array,
    boolean,
    integer,
    nullable,
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
NO_EFFECT = nullable({**FREE_OBJECT, "description": "accepted; no effect here"})
STOP_SEQUENCES = nullable(
    array({"type": "string", "maxLength": MAX_STOP_CHARS}, maxItems=MAX_STOPS)
)

__all__ = ["MODEL", "OUTPUT_CAP", "PRIORITY", "SPECULATIVE"]
