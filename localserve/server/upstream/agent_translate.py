"""Anthropic's Messages and OpenAI's Responses requests as an upstream's Chat Completions, and
its answer back as the parsed pieces both faces write their answers from. Pure: no HTTP here.

The faces read their request as they do for a local model (anthropic/request.py,
responses/request.py), which refuses what they do not take; the conversation, the tools and
the tool choice come from that reading (`Ask`), the sampling fields from the body as the
client sent them (none is added: the upstream's defaults hold). What has no Chat Completions
field and would change the answer (Anthropic's `thinking` enabled, with its budget) is a 400
naming it. Past thinking in the conversation is not sent back, as most chat templates drop it.
"""

from __future__ import annotations

import json
from typing import Any

from localserve.ground.errors import BadRequest
from localserve.server.chat.tool_calls import ToolRequest
from localserve.server.turn.ask import Ask

JSON = dict[str, Any]


# -- requests ----------------------------------------------------------------------------------


def history(messages: list[JSON]) -> list[JSON]:
    """The faces' messages (calls' arguments as objects, thinking as `reasoning_content`) as
    Chat Completions takes them: arguments as JSON text, no past thinking."""
    out: list[JSON] = []
    for m in messages:
        one = {k: v for k, v in m.items() if k != "reasoning_content"}
        if m.get("tool_calls"):
            one["tool_calls"] = [
                {**c, "function": {**c["function"], "arguments": _text(c["function"]["arguments"])}}
                for c in m["tool_calls"]
            ]
        out.append(one)
    return out


def _text(arguments: Any) -> str:
    return arguments if isinstance(arguments, str) else json.dumps(arguments, ensure_ascii=False)


def tool_fields(tools: ToolRequest | None, parallel: bool | None) -> JSON:
    """`tools` and `tool_choice` (and `parallel_tool_calls` when the client said)."""
    if tools is None:  # none given, or a choice of none: no tool may be called
        return {}
    choice: Any = tools.choice
    if choice == "function":
        choice = {"type": "function", "function": {"name": tools.named}}
    out: JSON = {"tools": [f.as_tool() for f in tools.functions], "tool_choice": choice}
    if parallel is not None:
        out["parallel_tool_calls"] = parallel
    return out


def schema_format(schema: JSON, name: str = "answer", strict: Any = None) -> JSON:
    spec: JSON = {"name": name, "schema": schema}
    if strict is not None:
        spec["strict"] = strict
    return {"type": "json_schema", "json_schema": spec}


def _base(model: str, ask: Ask, stream: bool) -> JSON:
    out: JSON = {"model": model, "messages": history(ask.messages), "stream": stream}
    if stream:
        out["stream_options"] = {"include_usage": True}
    return out


def _copy(body: JSON, names: dict[str, str], out: JSON) -> None:
    for theirs, ours in names.items():
        if body.get(theirs) is not None:
            out[ours] = body[theirs]


ANTHROPIC_SAMPLING = {
    "max_tokens": "max_tokens",
    "temperature": "temperature",
    "top_p": "top_p",
    "top_k": "top_k",  # not OpenAI's; vLLM, SGLang and llama.cpp's servers take it
    "stop_sequences": "stop",
}


def anthropic_request(body: JSON, ask: Ask, model: str, upstream: str, stream: bool) -> JSON:
    """/v1/messages's body, read into `ask`, as a Chat Completions request."""
    thinking = body.get("thinking")
    if isinstance(thinking, dict) and thinking.get("type") == "enabled":
        raise BadRequest(
            f"'thinking' enabled (with a budget) has no equivalent on upstream '{upstream}' (an "
            "OpenAI-compatible server): leave it out, or make it adaptive (its model thinks "
            "as it does)",
            "thinking",
        )
    out = _base(model, ask, stream)
    _copy(body, ANTHROPIC_SAMPLING, out)
    choice = body.get("tool_choice")
    parallel = (
        False if isinstance(choice, dict) and choice.get("disable_parallel_tool_use") else None
    )
    out.update(tool_fields(ask.tools, parallel))
    config = body.get("output_config")
    fmt = config.get("format") if isinstance(config, dict) else None
    if isinstance(fmt, dict) and isinstance(fmt.get("schema"), dict):
        out["response_format"] = schema_format(fmt["schema"])
    return out


def counting_request(body: JSON, ask: Ask, model: str, upstream: str) -> JSON:
    """/v1/messages/count_tokens's body as a one-token Chat Completion, whose usage counts the
    prompt as the upstream renders it."""
    return {
        **anthropic_request({**body, "max_tokens": 1}, ask, model, upstream, False),
        "temperature": 0,
    }


RESPONSES_SAMPLING = {
    "max_output_tokens": "max_tokens",
    "temperature": "temperature",
    "top_p": "top_p",
    "parallel_tool_calls": "parallel_tool_calls",
}


def responses_request(body: JSON, ask: Ask, model: str, stream: bool) -> JSON:
    """/v1/responses's body, read into `ask` (its instructions and any previous response's
    conversation already in its messages), as a Chat Completions request."""
    out = _base(model, ask, stream)
    _copy(body, RESPONSES_SAMPLING, out)
    out.update(tool_fields(ask.tools, None))
    reasoning = body.get("reasoning")
    effort = reasoning.get("effort") if isinstance(reasoning, dict) else None
    if effort is not None:
        out["reasoning_effort"] = effort
    text = body.get("text")
    fmt = text.get("format") if isinstance(text, dict) else None
    kind = fmt.get("type") if isinstance(fmt, dict) else None
    if kind == "json_object":
        out["response_format"] = {"type": "json_object"}
    elif kind == "json_schema" and isinstance(fmt, dict):
        out["response_format"] = schema_format(
            fmt["schema"], fmt.get("name") or "answer", fmt.get("strict")
        )
    return out
