"""The JSON Schemas of /openapi.json for the agent faces (server/openapi.py): Anthropic's
Messages (anthropic/request.py reads them) and OpenAI's Responses (responses/request.py), each
request as its reader takes it and each answer as the face writes it. Fields their readers
refuse are not listed; a body with an unknown field is a 400.
"""

from __future__ import annotations

from localserve.server.openapi_schemas import (
    FREE_OBJECT, INT, MODEL, NAT, NULL, STOP, STRING, Schema, array, boolean, integer, nullable,
    number, obj, one_of, text,
)
from localserve.server.http.validation import MAX_STOP_CHARS, MAX_STOPS


def _fixed(properties: dict[str, Schema], *optional: str) -> Schema:
    return obj(properties, tuple(k for k in properties if k not in optional))


# -- Anthropic ---------------------------------------------------------------------------------

CACHE_CONTROL = nullable({**FREE_OBJECT, "description": "accepted; no effect here"})
A_TEXT = obj({"type": {"const": "text"}, "text": STRING, "cache_control": CACHE_CONTROL},
             ("type", "text"))  # fmt: skip
A_TOOL_USE = obj({"type": {"const": "tool_use"}, "id": STRING, "name": STRING,
                  "input": FREE_OBJECT, "cache_control": CACHE_CONTROL},
                 ("type", "id", "name", "input"))  # fmt: skip
A_TOOL_RESULT = obj({
    "type": {"const": "tool_result"}, "tool_use_id": STRING,
    "content": one_of(STRING, array(A_TEXT), NULL), "is_error": boolean(False),
    "cache_control": CACHE_CONTROL,
}, ("type", "tool_use_id"))  # fmt: skip
A_THINKING = obj({"type": {"const": "thinking"}, "thinking": STRING, "signature": STRING},
                 ("type", "thinking"))  # fmt: skip
A_MESSAGE = obj({
    "role": {"enum": ["user", "assistant", "system"]},
    "content": one_of(STRING, array(one_of(A_TEXT, A_TOOL_USE, A_TOOL_RESULT, A_THINKING))),
}, ("role", "content"))  # fmt: skip
A_TOOL = obj({
    "name": {"type": "string", "minLength": 1}, "description": text(),
    "input_schema": {**FREE_OBJECT, "description": "a JSON Schema of the input"},
    "type": {"enum": ["custom", None]}, "cache_control": CACHE_CONTROL,
    "defer_loading": boolean(False, "not offered to the model until a request lists it "
                                    "without this"),
}, ("name", "input_schema"))  # fmt: skip
A_TOOL_CHOICE = nullable(obj({
    "type": {"enum": ["auto", "any", "tool", "none"]}, "name": text("with type tool"),
    "disable_parallel_tool_use": boolean(False),
}, ("type",)))  # fmt: skip
A_THINKING_CONFIG = nullable(obj({
    "type": {"enum": ["enabled", "adaptive", "disabled"]},
    "budget_tokens": integer(1, 1 << 30, doc="with enabled: less than max_tokens"),
    "display": text("omitted: thinking blocks come without their text; any other: with all "
                    "of it"),
}, ("type",)))  # fmt: skip
A_PROMPT = {
    "model": MODEL,
    "messages": array(A_MESSAGE, minItems=1),
    "system": one_of(STRING, array(A_TEXT), NULL,
                     description="a block that is Claude Code's x-anthropic-billing-header line "
                     "is left out of the prompt"),
    "tools": nullable(array(A_TOOL)),
    "tool_choice": A_TOOL_CHOICE,
    "thinking": A_THINKING_CONFIG,
    "output_config": nullable(obj({
        "effort": {"description": "accepted; no effect here"},
        "format": nullable(obj({"type": {"const": "json_schema"}, "schema": FREE_OBJECT},
                               ("type", "schema"))),
    })),
    "cache_control": CACHE_CONTROL,
    "context_management": nullable({**FREE_OBJECT, "description": "accepted; no effect here"}),
}  # fmt: skip
_A_STOP = {"type": "string", "maxLength": MAX_STOP_CHARS}
MESSAGES_REQUEST = obj({
    **A_PROMPT,
    "max_tokens": integer(1, 1 << 30, doc="at most a slot's context (a larger one is a 400)"),
    "stop_sequences": nullable(array(_A_STOP, maxItems=MAX_STOPS)),
    "temperature": number(0, 1, 0.8), "top_p": number(0, 1, 0.95),
    "top_k": integer(0, 1 << 20, 40), "stream": boolean(False),
    "metadata": nullable({**FREE_OBJECT, "description": "accepted; no effect here"}),
    **{key: text("accepted; no effect here") for key in (
        "service_tier", "speed", "inference_geo", "user_profile_id", "workspace_id")},
    "diagnostics": nullable({**FREE_OBJECT, "description": "accepted; no effect here"}),
}, ("model", "messages", "max_tokens"))  # fmt: skip
A_BLOCK_OUT = one_of(
    _fixed({"type": {"const": "text"}, "text": STRING}),
    _fixed({"type": {"const": "thinking"}, "thinking": STRING, "signature": STRING}),
    _fixed({"type": {"const": "tool_use"}, "id": STRING, "name": STRING, "input": FREE_OBJECT}),
)
A_USAGE = _fixed({"input_tokens": NAT, "output_tokens": NAT, "cache_read_input_tokens": NAT,
                  "cache_creation_input_tokens": NAT})  # fmt: skip

# -- OpenAI's Responses ------------------------------------------------------------------------

R_PART = obj({"type": {"enum": ["input_text", "output_text", "text"]}, "text": STRING},
             ("type", "text"))  # fmt: skip
R_CONTENT = one_of(STRING, array(R_PART))
R_ITEM = one_of(
    obj({"type": {"const": "message"}, "role": {"enum": ["user", "assistant", "system",
                                                         "developer"]},
         "content": R_CONTENT}, ("role", "content")),
    obj({"type": {"const": "function_call"}, "call_id": STRING, "name": STRING,
         "arguments": STRING, "namespace": text()}, ("type", "call_id", "name")),
    obj({"type": {"const": "function_call_output"}, "call_id": STRING,
         "output": R_CONTENT}, ("type", "call_id", "output")),
    obj({"type": {"const": "reasoning"}, "summary": array(obj({"text": STRING})),
         "content": nullable(array(obj({"text": STRING})))}, ("type",)),
)  # fmt: skip
R_FUNCTION = obj({"type": {"const": "function"}, "name": {"type": "string", "minLength": 1},
                  "description": text(), "parameters": nullable(FREE_OBJECT),
                  "strict": boolean(), "defer_loading": boolean(False)},
                 ("type", "name"))  # fmt: skip
R_TOOL = one_of(
    R_FUNCTION,
    obj({"type": {"const": "namespace"}, "name": STRING, "description": text(),
         "tools": array(R_FUNCTION)}, ("type", "name", "tools")),
    obj({"type": {"enum": ["web_search", "web_search_preview", "file_search",
                           "code_interpreter", "image_generation", "mcp", "local_shell"]}},
        ("type",), description="not offered to the model: left out"),
)  # fmt: skip
RESPONSES_REQUEST = obj({
    "model": MODEL,
    "input": one_of(STRING, array(R_ITEM, minItems=1)),
    "instructions": text("this request's system message"),
    "tools": nullable(array(R_TOOL)),
    "tool_choice": one_of({"enum": ["auto", "none", "required"]},
                          obj({"type": {"const": "function"}, "name": STRING},
                              ("type", "name")), NULL),
    "parallel_tool_calls": boolean(True),
    "max_output_tokens": integer(1, 1 << 30, doc="at most a slot's context"),
    "temperature": number(0, 2, 0.8), "top_p": number(0, 1, 0.95),
    "text": nullable(obj({"format": nullable(one_of(
        obj({"type": {"enum": ["text", "json_object"]}}, ("type",)),
        obj({"type": {"const": "json_schema"}, "name": STRING, "schema": FREE_OBJECT,
             "strict": boolean()}, ("type", "schema")),
    )), "verbosity": {"description": "accepted; no effect here"}})),
    "reasoning": nullable(obj({
        "effort": nullable({"enum": ["none", "minimal", "low", "medium", "high", "xhigh"]}),
        "summary": nullable({"enum": ["auto", "concise", "detailed"]}),
    })),
    "store": boolean(True, "keep it for previous_response_id"),
    "previous_response_id": text("a stored response to continue"),
    "stream": boolean(False),
    "truncation": nullable({"const": "disabled"}),
    "include": nullable(array(STRING, description="accepted; no effect here")),
    **{key: text("accepted; no effect here") for key in (
        "prompt_cache_key", "prompt_cache_retention", "user", "safety_identifier",
        "service_tier")},
    **{key: nullable({**FREE_OBJECT, "description": "accepted; no effect here"})
       for key in ("client_metadata", "metadata", "stream_options")},
}, ("model", "input"))  # fmt: skip
R_OUTPUT = one_of(
    _fixed({"type": {"const": "message"}, "id": STRING, "status": STRING,
            "role": {"const": "assistant"},
            "content": array(_fixed({"type": {"const": "output_text"}, "text": STRING,
                                     "annotations": array(FREE_OBJECT),
                                     "logprobs": array(FREE_OBJECT)}))}),
    _fixed({"type": {"const": "function_call"}, "id": STRING, "call_id": STRING,
            "name": STRING, "arguments": STRING, "status": STRING, "namespace": STRING},
           "namespace"),
    _fixed({"type": {"const": "reasoning"}, "id": STRING, "summary": array(FREE_OBJECT),
            "content": array(FREE_OBJECT), "encrypted_content": NULL, "status": STRING}),
)  # fmt: skip
RESPONSE = obj({
    "id": STRING, "object": {"const": "response"}, "created_at": INT,
    "status": {"enum": ["completed", "incomplete", "failed", "in_progress"]},
    "model": STRING, "output": array(R_OUTPUT),
    "incomplete_details": nullable(_fixed({"reason": STRING})),
    "error": nullable(_fixed({"code": STRING, "message": STRING})),
    "usage": nullable(_fixed({
        "input_tokens": NAT, "input_tokens_details": _fixed({"cached_tokens": NAT}),
        "output_tokens": NAT, "output_tokens_details": _fixed({"reasoning_tokens": NAT}),
        "total_tokens": NAT,
    })),
}, ("id", "object", "created_at", "status", "model", "output"))  # fmt: skip

AGENT_REQUESTS: dict[str, Schema] = {
    "MessagesRequest": MESSAGES_REQUEST,
    "CountTokensRequest": obj(A_PROMPT, ("model", "messages")),
    "ResponsesRequest": RESPONSES_REQUEST,
}
AGENT_ANSWERS: dict[str, Schema] = {
    "AnthropicError": _fixed({"type": {"const": "error"},
                              "error": _fixed({"type": STRING, "message": STRING})}),
    "AnthropicMessage": _fixed({
        "id": STRING, "type": {"const": "message"}, "role": {"const": "assistant"},
        "model": STRING, "content": array(A_BLOCK_OUT),
        "stop_reason": {"enum": ["end_turn", "max_tokens", "stop_sequence", "tool_use"]},
        "stop_sequence": nullable(STRING), "usage": A_USAGE,
    }),  # fmt: skip
    "TokenCount": _fixed({"input_tokens": NAT}),
    "Response": RESPONSE,
    "ResponseDeleted": _fixed({"id": STRING, "object": {"const": "response"},
                               "deleted": {"const": True}}),  # fmt: skip
}
