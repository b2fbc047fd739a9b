"""What several request bodies of /openapi.json share: the model, keep-alive, stop strings,
messages, tools, sampling and Ollama's options, as server/http/validation.py checks them."""

from __future__ import annotations

from localserve.server.chat.plan import EFFORTS
from localserve.server.http import validation as v
from localserve.server.http.readers import ROLES, keep_alive, model_name
from localserve.server.http.validation import MAX_STOP_CHARS, MAX_STOPS
from localserve.server.wire.declare import Field
from localserve.server.wire.shapes import (
    FREE_OBJECT,
    NAT,
    STRING,
    Schema,
    array,
    boolean,
    integer,
    nullable,
    number,
    obj,
    one_of,
    ref,
    text,
)

NO_LIMIT = (1 << 31) - 1  # Ollama's "no limit" for its whole-number options
SEED = (-(1 << 63), (1 << 64) - 1)

# -- what several requests share ---------------------------------------------------------------

MODEL = {"type": "string", "minLength": 1, "description": "a model's name", "examples": ["smollm2"]}
MODEL_OR_NAME = {
    "model": {**MODEL, "description": "the model's name; `name` is taken when it is missing"},
    "name": {**text("the older name of `model`"), "examples": ["smollm2"]},
}
NAMED: Schema = {"anyOf": [{"required": ["model"]}, {"required": ["name"]}]}
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
STOP = one_of(
    _STOP,
    array(_STOP, maxItems=MAX_STOPS),
    {"type": "null"},
    description="text that ends the answer",
)
TOKEN_IDS = array(NAT, minItems=1, description="token ids, each below the model's vocabulary size")
TEXT_PART = obj({"type": {"const": "text"}, "text": STRING}, ("type",))
TOOL_CALL_IN = obj(
    {
        "id": text(),
        "type": {"const": "function"},
        "function": obj(
            {
                "name": STRING,
                "arguments": one_of(
                    {"type": "string", "description": "JSON text (OpenAI)"},
                    {"type": "object", "description": "an object (Ollama)"},
                    {"type": "null"},
                ),
            },
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
    {
        "name": {"type": "string", "minLength": 1},
        "description": text(),
        "parameters": nullable({**FREE_OBJECT, "description": "a JSON Schema of the arguments"}),
    },
    ("name",),
)
TOOLS = nullable(
    array(
        obj({"type": {"const": "function"}, "function": FUNCTION}, ("function",)),
        description="functions the answer may call, each name once",
    )
)
TOOL_CHOICE = one_of(
    {"enum": ["auto", "none", "required"]},
    obj(
        {"type": {"const": "function"}, "function": obj({"name": STRING}, ("name",))}, ("function",)
    ),
    {"type": "null"},
    description="a named function must be one of `tools`; required or a named function "
    "without tools is a 400",
)
TOOL_FIELDS = {"tools": TOOLS, "tool_choice": TOOL_CHOICE, "parallel_tool_calls": boolean(True)}
EFFORT = {
    "enum": [*EFFORTS, None],
    "description": "none: the model does not think; any other level: it thinks (the "
    "template's thinking switch; no level is graded finer)",
}
RESPONSE_FORMAT = one_of(
    obj({"type": {"enum": ["text", "json_object"]}}, ("type",)),
    obj(
        {
            "type": {"const": "json_schema"},
            "json_schema": obj({"name": STRING, "schema": FREE_OBJECT}, ("schema",)),
        },
        ("type", "json_schema"),
    ),
    {"type": "null"},
)
TEMPLATE_KWARGS = nullable(
    {
        **FREE_OBJECT,
        "description": "more variables for the model's chat template",
        "propertyNames": {
            "not": {
                "enum": ["messages", "tools", "add_generation_prompt", "bos_token", "eos_token"]
            }
        },
    }
)
PENALTIES = {"presence_penalty": number(-2, 2, 0), "frequency_penalty": number(-2, 2, 0)}
SPECULATIVE = one_of(
    {"type": "boolean"},
    integer(0, 32),
    {"type": "null"},
    description="draft tokens a step may verify for the request (prompt lookup; not with "
    "penalties, grammar, logit bias, or a seed while sampling): a count, false for none, "
    "true or null for the server's --speculative",
)
PRIORITY = {
    "enum": ["interactive", "background", None],
    "description": "interactive (the default) or background: background requests yield their "
    "slots to interactive ones (the X-Priority header says the same; this field wins)",
}

# OpenAI's sampling fields, with llama.cpp's top_k, min_p and repeat_penalty.
# Output caps are upper bounds (server/turn/local.py check_room), never refusals.
OUTPUT_CAP = 'at most; one above the room the prompt leaves is clamped to it, ending "length"'

# onnxruntime-genai's Engine samples without these (backends/onnx_genai.py engine_lacks).
ENGINE_LACKS = "a 400 on an ONNX model that onnxruntime-genai's Engine runs (not our own rows)"

OLLAMA_FORMAT = one_of(
    {"enum": ["json", ""]},
    FREE_OBJECT,
    {"type": "null"},
    description='"json", or a JSON Schema the answer follows',
)
THINK = one_of({"type": "boolean"}, {"enum": ["high", "medium", "low"]}, {"type": "null"})

# The fields every face reads alike: the model a request names, and its keep-alive.
MODEL_FIELD = Field(MODEL, lambda body, _: model_name(body, accept_name=False))
KEEP_ALIVE_FIELD = Field(KEEP_ALIVE, lambda body, _: keep_alive(body))
STOP_FIELD = Field(STOP, v.stop_list, "stop")
SPECULATIVE_FIELD = Field(SPECULATIVE, v.draft_tokens, "draft_tokens")
PRIORITY_FIELD = Field(PRIORITY)  # read with every face's (server/http/priority.py)
