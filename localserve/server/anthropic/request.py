"""Anthropic's Messages API requests (Claude Code's), read into a `Ask`.

- `system`, a string or text blocks, becomes the first system message. A block that is Claude
  Code's per-request `x-anthropic-billing-header: ...` line is left out of the prompt: it
  changes every turn, and at the head of the prompt it would defeat the prefix cache.
- `messages` hold `text`, `tool_use`, `tool_result` (string or text blocks, `is_error`) and
  `thinking` blocks, and `system` messages mid-conversation. `redacted_thinking` is Anthropic's
  own ciphertext, which no local model can read: it is left out. Image and document blocks are
  refused: the models served here read text.
- `tools` (custom tools with an `input_schema`; a tool with `defer_loading` is offered once a
  later request lists it without) and `tool_choice` (`auto`, `any`, `tool`, `none`,
  `disable_parallel_tool_use`) become the tool request the grammar enforces.
- `thinking`: `enabled` thinks within `budget_tokens` where the template opens the thinking
  block (server/turn/local.py ends it there; a model that cannot think is a 400), `adaptive`
  thinks where the model can, `disabled` does not; `display: "omitted"` sends thinking blocks
  without their text, and any other display (`summarized`, Claude Code's `updates`) the whole
  thinking.
- `output_config.format` (a JSON schema) constrains the answer.
- `metadata`, `cache_control` (on the request or any block), `context_management`,
  `output_config.effort`, `service_tier`, `speed`, `inference_geo`, `diagnostics`,
  `user_profile_id` and `workspace_id` are accepted and have no effect here.
- `temperature`, `top_p` and `top_k` are honoured (the SDKs of 2026 no longer name them; send
  them in the body).

Any other field is a 400 that names it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from localserve.ground.errors import BadRequest
from localserve.server.anthropic import schemas as s
from localserve.server.chat import structured
from localserve.server.chat.tool_calls import read_tools
from localserve.server.http import validation as v
from localserve.server.turn.ask import Ask
from localserve.server.wire import shapes
from localserve.server.wire.declare import Body, Field, boolean, integer, number
from localserve.server.wire.fields import MODEL_FIELD, PRIORITY_FIELD, SPECULATIVE_FIELD

BILLING_HEADER = "x-anthropic-billing-header:"


def _max_tokens(body: v.JSON, key: str) -> int:
    n = v.integer(body, key, None, 1, 1 << 30)
    if n is None:
        raise BadRequest("'max_tokens' is required", key)
    return n


def _thinking_of(counting: bool) -> Field:
    def read(body: v.JSON, key: str) -> tuple[bool | None, bool, bool, int | None]:
        cap = None if counting else v.integer(body, "max_tokens", None, 1, 1 << 30)
        return _thinking(v.obj(body, key), cap)

    return Field(s.A_THINKING_CONFIG, read)


def _no_effect(kind: str) -> Field:
    """Accepted and of its kind, with no effect here."""
    if kind == "object":
        return Field(s.NO_EFFECT, v.obj)
    return Field(shapes.text("accepted; no effect here"), v.string)


# What both read, count_tokens too: the prompt's parts.
PROMPT = {
    "cache_control": Field(s.CACHE_CONTROL, v.obj),
    "context_management": _no_effect("object"),
    "system": Field(s.A_PROMPT["system"], lambda body, key: _system(body.get(key))),
    "messages": Field(s.A_PROMPT["messages"], lambda body, key: _messages(body.get(key))),
}
TOOLS = {
    "output_config": Field(
        s.A_PROMPT["output_config"], lambda body, key: _format(v.obj(body, key)), "grammar"
    ),
    "tools": Field(s.A_PROMPT["tools"], lambda body, _: _tools(body)),
    "tool_choice": Field(s.A_PROMPT["tool_choice"]),  # read with the tools
    "model": MODEL_FIELD,
}
MESSAGES = Body(
    "MessagesRequest",
    {
        **{k: _no_effect("object") for k in ("metadata", "diagnostics")},
        **{
            k: _no_effect("string")
            for k in ("service_tier", "speed", "inference_geo", "user_profile_id", "workspace_id")
        },
        **PROMPT,
        "max_tokens": Field(
            shapes.integer(1, 1 << 30, doc=s.OUTPUT_CAP), _max_tokens, "max_tokens"
        ),
        "thinking": _thinking_of(counting=False),
        "temperature": number(0, 1, 0.8, to="temperature"),
        "top_p": number(0, 1, 0.95, to="top_p"),
        "top_k": integer(0, 1 << 20, 40, to="top_k"),
        "stop_sequences": Field(s.STOP_SEQUENCES, v.stop_list, "stop"),
        "speculative": SPECULATIVE_FIELD,
        **TOOLS,
        "stream": boolean(False),
        "priority": PRIORITY_FIELD,
    },
    ("model", "messages", "max_tokens"),
    closed=True,
)
COUNT_TOKENS = Body(
    "CountTokensRequest",
    {**PROMPT, "thinking": _thinking_of(counting=True), **TOOLS},
    ("model", "messages"),
    closed=True,
)


@dataclass
class MessagesRequest:
    ask: Ask
    stream: bool = False
    show_thinking: bool = True


def read_request(body: v.JSON, counting: bool = False) -> MessagesRequest:
    """A /v1/messages body (or /v1/messages/count_tokens's, `counting`) as a chat turn."""
    declared = COUNT_TOKENS if counting else MESSAGES
    got = declared.read(body)
    think, think_if_able, show, budget = got["thinking"]
    ask = Ask(
        got["model"],
        got["system"] + got["messages"],
        declared.sampling(got),
        got["tools"],
        think,
        think_if_able=think_if_able,
        thinking_budget=budget,
    )
    return MessagesRequest(ask, got.get("stream", False), show)


# -- the prompt --------------------------------------------------------------------------------


def _system(system: Any) -> list[dict[str, Any]]:
    if system is None or system == "":
        return []
    if isinstance(system, str):
        return [{"role": "system", "content": system}]
    if not isinstance(system, list):
        raise BadRequest("'system' must be a string or a list of text blocks", "system")
    texts = [_text_block(b, "system") for b in system]
    texts = [t for t in texts if not t.startswith(BILLING_HEADER)]
    return [{"role": "system", "content": "\n".join(texts)}] if texts else []


def _text_block(block: Any, where: str) -> str:
    if not isinstance(block, dict) or block.get("type") != "text":
        kind = block.get("type") if isinstance(block, dict) else type(block).__name__
        raise BadRequest(
            f"{where}: a {kind!r} block is not supported here; only text is", _field(where)
        )
    text = block.get("text")
    if not isinstance(text, str):
        raise BadRequest(f"{where}: a text block's 'text' must be a string", _field(where))
    return text


def _field(where: str) -> str:
    return where.partition("[")[0]


def _messages(messages: Any) -> list[dict[str, Any]]:
    if not isinstance(messages, list) or not messages:
        raise BadRequest("'messages' must be a non-empty list", "messages")
    out: list[dict[str, Any]] = []
    for i, m in enumerate(messages):
        where = f"messages[{i}]"
        if not isinstance(m, dict) or m.get("role") not in ("user", "assistant", "system"):
            raise BadRequest(
                f"{where} must be an object whose role is user, assistant or system", "messages"
            )
        content = m.get("content")
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
        if not isinstance(blocks, list):
            raise BadRequest(f"{where}.content must be a string or a list of blocks", "messages")
        if m["role"] == "assistant":
            out.append(_assistant(blocks, where))
        elif m["role"] == "system":
            out.append(
                {
                    "role": "system",
                    "content": "\n".join(_text_block(b, f"{where}.content") for b in blocks),
                }
            )
        else:
            out += _user(blocks, where)
    return out


def _assistant(blocks: list[Any], where: str) -> dict[str, Any]:
    texts, thinking, calls = [], [], []
    for j, block in enumerate(blocks):
        kind = block.get("type") if isinstance(block, dict) else None
        at = f"{where}.content[{j}]"
        if kind == "tool_use":
            name, call_id, arguments = block.get("name"), block.get("id"), block.get("input", {})
            if (
                not isinstance(name, str)
                or not isinstance(call_id, str)
                or not isinstance(arguments, dict)
            ):
                raise BadRequest(
                    f"{at}: a tool_use block needs an 'id', a 'name' and an 'input' object",
                    "messages",
                )
            calls.append(
                {
                    "id": call_id,
                    "type": "function",
                    "function": {"name": name, "arguments": arguments},
                }
            )
        elif kind == "thinking":
            thinking.append(str(block.get("thinking") or ""))
        elif kind != "redacted_thinking":
            texts.append(_text_block(block, at))
    message: dict[str, Any] = {"role": "assistant", "content": "\n".join(texts)}
    if thinking:
        message["reasoning_content"] = "\n".join(thinking)
    if calls:
        message["tool_calls"] = calls
    return message


def _user(blocks: list[Any], where: str) -> list[dict[str, Any]]:
    """Tool results (each a tool message, as the templates read them), then the user's text."""
    out: list[dict[str, Any]] = []
    texts: list[str] = []
    for j, block in enumerate(blocks):
        at = f"{where}.content[{j}]"
        if isinstance(block, dict) and block.get("type") == "tool_result":
            out.append(_tool_result(block, at))
        else:
            texts.append(_text_block(block, at))
    if texts:
        out.append({"role": "user", "content": "\n".join(texts)})
    return out


def _tool_result(block: dict[str, Any], at: str) -> dict[str, Any]:
    call_id = block.get("tool_use_id")
    if not isinstance(call_id, str):
        raise BadRequest(f"{at}: a tool_result needs its 'tool_use_id'", "messages")
    content = block.get("content") or ""
    if isinstance(content, list):
        content = "\n".join(_text_block(b, f"{at}.content") for b in content)
    elif not isinstance(content, str):
        raise BadRequest(f"{at}.content must be a string or text blocks", "messages")
    if v.boolean(block, "is_error", False):
        content = f"Error: {content}"
    return {"role": "tool", "tool_call_id": call_id, "content": content}


# -- tools, thinking and format ----------------------------------------------------------------


def _tools(body: v.JSON) -> Any:
    tools = body.get("tools")
    if tools is None:
        tools = []  # still read tool_choice: `any` or `tool` with no tools is refused
    if not isinstance(tools, list):
        raise BadRequest("'tools' must be a list of tools", "tools")
    functions = []
    for i, tool in enumerate(tools):
        if not isinstance(tool, dict) or tool.get("type", "custom") not in ("custom", None):
            kind = tool.get("type") if isinstance(tool, dict) else None
            raise BadRequest(
                f"tools[{i}]: the {kind!r} tool is run by Anthropic's servers and "
                "is not available here; give custom tools with an "
                "input_schema",
                "tools",
            )
        if v.boolean(tool, "defer_loading", False):
            continue  # not offered until a later request lists it without defer_loading
        schema = tool.get("input_schema")
        if schema is None:
            raise BadRequest(f"tools[{i}] needs an 'input_schema'", "tools")
        function = {
            "name": tool.get("name"),
            "description": tool.get("description") or "",
            "parameters": schema,
        }
        functions.append({"type": "function", "function": function})
    choice = body.get("tool_choice")
    if choice is not None and not isinstance(choice, dict):
        raise BadRequest("'tool_choice' must be an object with a 'type'", "tool_choice")
    choice = choice or {"type": "auto"}
    kind = choice.get("type")
    openai_choice: Any = {"auto": "auto", "any": "required", "none": "none"}.get(str(kind))
    if kind == "tool":
        openai_choice = {"type": "function", "function": {"name": choice.get("name")}}
    if openai_choice is None:
        raise BadRequest("'tool_choice.type' must be auto, any, tool or none", "tool_choice")
    parallel = not v.boolean(choice, "disable_parallel_tool_use", False)
    return read_tools(
        {"tools": functions, "tool_choice": openai_choice, "parallel_tool_calls": parallel}
    )


def _thinking(
    thinking: v.JSON, max_tokens: int | None
) -> tuple[bool | None, bool, bool, int | None]:
    """(think, think where the model can, show the thinking's text, its budget)."""
    kind = thinking.get("type") if thinking else None
    # No model here summarizes its thinking: every display but "omitted" shows all of it
    # ("summarized", or Claude Code's "updates").
    show = v.string(thinking, "display") != "omitted"
    if kind is None:
        return None, False, show, None
    if kind == "disabled":
        return False, False, show, None
    if kind == "adaptive":
        return None, True, show, None
    if kind == "enabled":
        budget = v.integer(thinking, "budget_tokens", None, 1, 1 << 30)
        if budget is None:
            raise BadRequest(
                "'thinking.budget_tokens' is required when thinking is enabled", "thinking"
            )
        if max_tokens is not None and budget >= max_tokens:
            raise BadRequest("'thinking.budget_tokens' must be less than 'max_tokens'", "thinking")
        return True, False, show, budget
    raise BadRequest("'thinking.type' must be enabled, adaptive or disabled", "thinking")


def _format(config: v.JSON) -> Any:
    unknown = sorted(set(config) - {"effort", "format"})
    if unknown:
        raise BadRequest(f"'output_config.{unknown[0]}' is not supported here", "output_config")
    fmt = v.obj(config, "format")
    if not fmt:
        return None
    if fmt.get("type") != "json_schema" or not isinstance(fmt.get("schema"), dict):
        raise BadRequest(
            "'output_config.format' must be {'type': 'json_schema', 'schema': {...}}",
            "output_config",
        )
    # Strict, as Anthropic's own structured outputs are: a keyword it cannot enforce is refused.
    return structured.schema_grammar(fmt["schema"], "output_config", strict=True)
