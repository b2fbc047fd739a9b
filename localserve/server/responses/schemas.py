"""The JSON Schemas of the parts of OpenAI's Responses requests, which responses/request.py
declares its bodies with (server/wire/declare.py)."""

from __future__ import annotations

from localserve.server.wire.fields import EFFORT, MODEL, OUTPUT_CAP, PRIORITY, SPECULATIVE
from localserve.server.wire.shapes import (
    FREE_OBJECT,
    NULL,
    STRING,
    array,
    boolean,
    nullable,
    obj,
    one_of,
    text,
)

# Tools whose calls are not function calls: left out, never offered to the model.
NOT_OFFERED = frozenset(
    {
        "web_search",
        "web_search_preview",
        "web_search_preview_2025_03_11",
        "web_search_2025_08_26",
        "file_search",
        "code_interpreter",
        "image_generation",
        "mcp",
        "tool_search",
        "computer",
        "computer_use_preview",
        "local_shell",
        "shell",
        "apply_patch",
    }
)
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
        {"type": {"enum": sorted(NOT_OFFERED)}},
        ("type",),
        description="not offered to the model: left out",
    ),
)
INPUT = one_of(STRING, array(R_ITEM, minItems=1))
TOOL_CHOICE = one_of(
    {"enum": ["auto", "none", "required"]},
    obj({"type": {"const": "function"}, "name": STRING}, ("type", "name")),
    NULL,
)
TEXT = nullable(
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
)
REASONING = nullable(
    obj(
        {
            "effort": {**EFFORT, "description": f"{EFFORT['description']}, where the model can"},
            "summary": nullable({"enum": ["auto", "concise", "detailed"]}),
        }
    )
)
NO_EFFECT_OBJECT = nullable({**FREE_OBJECT, "description": "accepted; no effect here"})

__all__ = ["MODEL", "OUTPUT_CAP", "PRIORITY", "SPECULATIVE"]
