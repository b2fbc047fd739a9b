"""OpenAI's Responses API requests (Codex's, and the `openai` SDK's `client.responses`), read
into a `Ask`.

- `instructions` is the system message of this request alone (a follow-up through
  `previous_response_id` does not inherit it, as in OpenAI's API).
- `input` is a string (one user message) or items: messages (`input_text`, `output_text`
  parts; roles user, assistant, system, developer), `function_call`, `function_call_output`
  and `reasoning` (its text is the thinking of the assistant turn it precedes). An assistant
  turn's reasoning, message and calls become one assistant message of the template.
- `tools`: `function` tools, and the functions of a `namespace` tool (shown to the model, and
  named in its calls, as `namespace.name`). A tool with `defer_loading` is not offered.
  **Tools whose calls are not function calls** (OpenAI's hosted tools: `web_search`,
  `file_search`, `code_interpreter`, `image_generation`, `mcp`, `tool_search`, `computer`;
  built-in client tools: `local_shell`, `shell`, `apply_patch`) **are left out**: the model is
  never offered them, so never half-runs one. A `custom` tool is a 400.
- `tool_choice` (`auto`, `none`, `required`, a named function), `parallel_tool_calls`,
  `max_output_tokens`, `temperature`, `top_p`, `text.format` (`text`, `json_object`,
  `json_schema`).
- `reasoning.effort`: `none` does not think; any other asks a model that thinks to think (one
  that does not answers directly). `reasoning.summary` returns the thinking as the reasoning
  item's summary too.
- `store`, `previous_response_id`: see responses/store.py.
- `include`, `prompt_cache_key`, `prompt_cache_retention`, `client_metadata`, `metadata`,
  `user`, `safety_identifier`, `service_tier`, `stream_options` and `text.verbosity` are
  accepted and have no effect here (`metadata` is echoed back).

Any other field is a 400 that names it, as are `truncation: "auto"`, logprobs and images.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from localserve.ground.errors import BadRequest
from localserve.ground.sampling import Grammar
from localserve.server.chat import structured
from localserve.server.chat.plan import read_effort
from localserve.server.chat.tool_calls import read_tools
from localserve.server.http import bounded_json
from localserve.server.http import validation as v
from localserve.server.http.readers import text_content
from localserve.server.responses import schemas as s
from localserve.server.responses.schemas import NOT_OFFERED
from localserve.server.turn.ask import Ask
from localserve.server.wire import shapes
from localserve.server.wire.declare import Body, Field, boolean, integer, number, text
from localserve.server.wire.fields import MODEL_FIELD, PRIORITY_FIELD, SPECULATIVE_FIELD

NAMESPACE_SEP = "."
_TEXT_PARTS = ("input_text", "output_text", "text", "summary_text", "reasoning_text", "refusal")


@dataclass
class ResponsesRequest:
    ask: Ask
    input: list[dict[str, Any]]  # this request's own messages, without the instructions
    instructions: str | None = None
    stream: bool = False
    store: bool = True
    previous_id: str | None = None
    summary: bool = False  # the reasoning item also gives the thinking as its summary
    echo: dict[str, Any] = field(default_factory=dict)  # what the response object repeats
    # The functions of namespace tools, as the model names them: (namespace, name).
    namespaced: dict[str, tuple[str, str]] = field(default_factory=dict)

    def call_name(self, qualified: str) -> tuple[str | None, str]:
        """(namespace, name) of a call the model wrote."""
        return self.namespaced.get(qualified, (None, qualified))


def _include(body: v.JSON, key: str) -> list[str]:
    include = v.strings(body, key)
    if "message.output_text.logprobs" in include:
        raise BadRequest("'include' asks for logprobs, which this server does not return", key)
    return include


def _truncation(body: v.JSON, key: str) -> None:
    if v.string(body, key) not in (None, "disabled"):
        raise BadRequest(
            "only 'truncation': 'disabled' is supported: a prompt longer than the "
            "context is refused",
            key,
        )


def _top_logprobs(body: v.JSON, key: str) -> None:
    if v.integer(body, key, 0, 0, 20):
        raise BadRequest(
            "'top_logprobs' is not supported: this server does not return token log-probabilities",
            key,
        )


def _reasoning(body: v.JSON, key: str) -> tuple[str | None, str | None]:
    """(effort, summary)."""
    reasoning = v.obj(body, key)
    effort = read_effort(reasoning.get("effort"), "reasoning.effort", key)
    summary = v.string(reasoning, "summary")
    if summary not in (None, "auto", "concise", "detailed"):
        raise BadRequest("'reasoning.summary' must be auto, concise or detailed", key)
    return effort, summary


def _whole_only(body: v.JSON, key: str) -> bool:
    """A compaction answers whole: a stream asked of it is refused, never silently not sent."""
    if v.boolean(body, key, False):
        raise BadRequest("a compaction answers whole: 'stream' must be false here", key)
    return False


def _tools_read(body: v.JSON, _: str) -> tuple[Any, dict[str, tuple[str, str]]]:
    namespaced: dict[str, tuple[str, str]] = {}
    return _tools(body, namespaced), namespaced


_NO_EFFECT = shapes.text("accepted; no effect here")
FIELDS: dict[str, Field] = {
    "include": Field(
        shapes.nullable(shapes.array(shapes.STRING, description="accepted; no effect here")),
        _include,
    ),
    **{
        key: Field(_NO_EFFECT, v.string)
        for key in (
            "prompt_cache_key",
            "prompt_cache_retention",
            "user",
            "safety_identifier",
            "service_tier",
        )
    },
    **{
        key: Field(s.NO_EFFECT_OBJECT, v.obj)
        for key in ("client_metadata", "metadata", "stream_options")
    },
    "truncation": Field(shapes.nullable({"const": "disabled"}), _truncation),
    "top_logprobs": Field(shapes.integer(0, 0, 0, "none are returned"), _top_logprobs),
    "instructions": text("this request's system message"),
    "input": Field(s.INPUT, lambda body, key: _input(body.get(key))),
    "reasoning": Field(s.REASONING, _reasoning),
    "temperature": number(0, 2, 0.8, to="temperature"),
    "top_p": number(0, 1, 0.95, to="top_p"),
    "max_output_tokens": integer(1, 1 << 30, doc=s.OUTPUT_CAP, to="max_tokens"),
    "text": Field(s.TEXT, lambda body, key: _format(v.obj(body, key)), "grammar"),
    "speculative": SPECULATIVE_FIELD,
    "tools": Field(shapes.nullable(shapes.array(s.R_TOOL)), _tools_read),
    "tool_choice": Field(s.TOOL_CHOICE),  # read with the tools
    "parallel_tool_calls": Field(shapes.boolean(True)),  # read with the tools
    "model": MODEL_FIELD,
    "stream": boolean(False),
    "store": boolean(True, "keep it for previous_response_id"),
    "previous_response_id": text("a stored response to continue"),
    "priority": PRIORITY_FIELD,
}
RESPONSES = Body("ResponsesRequest", FIELDS, ("model", "input"), closed=True)
# A compaction continues no stored response: its input is the whole conversation.
COMPACT = Body(
    "CompactRequest",
    {
        **FIELDS,
        "previous_response_id": Field(shapes.text("accepted; no effect here"), v.string),
        "max_output_tokens": integer(
            1, 1 << 30, doc="the summary's cap (default 2048)", to="max_tokens"
        ),
        "stream": Field(shapes.nullable({"const": False}), _whole_only),
    },
    ("model", "input"),
    closed=True,
)


def read_request(body: v.JSON, declared: Body = RESPONSES) -> ResponsesRequest:
    got = declared.read(body)
    effort, summary = got["reasoning"]
    instructions = got["instructions"]
    system = [{"role": "system", "content": instructions}] if instructions else []
    tools, namespaced = got["tools"]
    ask = Ask(
        got["model"],
        system + got["input"],
        declared.sampling(got),
        tools,
        think=False if effort == "none" else None,
        think_if_able=effort not in (None, "none"),
    )
    echo = {key: body.get(key) for key in ("tools", "tool_choice", "metadata", "reasoning")}
    return ResponsesRequest(
        ask,
        got["input"],
        instructions,
        got["stream"],
        got["store"],
        got.get("previous_response_id") or None,
        summary is not None,
        echo,
        namespaced,
    )


# -- input items -------------------------------------------------------------------------------


def _input(value: Any) -> list[dict[str, Any]]:
    if isinstance(value, str):
        return [{"role": "user", "content": value}]
    if not isinstance(value, list) or not value:
        raise BadRequest("'input' must be a string or a non-empty list of items", "input")
    out: list[dict[str, Any]] = []
    turn: dict[str, Any] | None = None  # the assistant turn being gathered
    for i, item in enumerate(value):
        where = f"input[{i}]"
        if not isinstance(item, dict):
            raise BadRequest(f"{where} must be an object", "input")
        kind = item.get("type") or ("message" if "role" in item else None)
        if kind == "message" and item.get("role") == "assistant":
            if turn is None or turn["content"] or turn.get("tool_calls"):
                turn = _new_turn(out)
            turn["content"] = _text(item.get("content"), where)
        elif kind == "function_call":
            if turn is None:
                turn = _new_turn(out)
            turn.setdefault("tool_calls", []).append(_past_call(item, where))
        elif kind == "reasoning":
            if turn is None or turn["content"] or turn.get("tool_calls"):
                turn = _new_turn(out)
            turn["reasoning_content"] = _reasoning_text(item, where)
        elif kind == "function_call_output":
            turn = None
            call_id = item.get("call_id")
            if not isinstance(call_id, str):
                raise BadRequest(f"{where}: a function_call_output needs its 'call_id'", "input")
            out.append(
                {
                    "role": "tool",
                    "tool_call_id": call_id,
                    "content": _text(item.get("output"), where),
                }
            )
        elif kind == "compaction":
            turn = None
            out.append({"role": "user", "content": expand_compaction(item, where)})
        elif kind == "message":
            turn = None
            role = item.get("role")
            if role not in ("user", "system", "developer"):
                raise BadRequest(
                    f"{where}.role must be user, assistant, system or developer", "input"
                )
            role = "system" if role == "developer" else role
            out.append({"role": role, "content": _text(item.get("content"), where)})
        else:
            raise BadRequest(f"{where}: items of type {kind!r} are not supported here", "input")
    return out


def _new_turn(out: list[dict[str, Any]]) -> dict[str, Any]:
    turn: dict[str, Any] = {"role": "assistant", "content": ""}
    out.append(turn)
    return turn


def _text(content: Any, where: str) -> str:
    """A message's content or a call's output: a string, or text parts."""
    return text_content(content, where, "input", _TEXT_PARTS)


def _reasoning_text(item: dict[str, Any], where: str) -> str:
    """The thinking a reasoning item holds: its content, else its summary."""
    content = item.get("content") or item.get("summary") or []
    return _text(content, where)


def _past_call(item: dict[str, Any], where: str) -> dict[str, Any]:
    name, call_id = item.get("name"), item.get("call_id")
    if not isinstance(name, str) or not isinstance(call_id, str):
        raise BadRequest(f"{where}: a function_call needs a 'call_id' and a 'name'", "input")
    namespace = item.get("namespace")
    if isinstance(namespace, str) and namespace:
        name = f"{namespace}{NAMESPACE_SEP}{name}"
    arguments = item.get("arguments") or "{}"
    if isinstance(arguments, str):
        try:
            arguments = bounded_json.loads(arguments)
        except bounded_json.BadJSON as exc:
            raise BadRequest(f"{where}.arguments {exc}", "input") from None
        # JSON inside a string may escape what the body's own check could not see.
        v.require_text(arguments, f"{where}.arguments", "input")
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


# -- tools and format --------------------------------------------------------------------------


def _tools(body: v.JSON, namespaced: dict[str, tuple[str, str]]) -> Any:
    tools = body.get("tools")
    if tools is None:
        tools = []  # still read tool_choice: "required" or a function with no tools is refused
    if not isinstance(tools, list):
        raise BadRequest("'tools' must be a list of tools", "tools")
    functions: list[dict[str, Any]] = []
    for i, tool in enumerate(tools):
        kind = tool.get("type") if isinstance(tool, dict) else None
        if isinstance(kind, str) and kind in NOT_OFFERED:
            continue
        if kind == "function":
            functions += _function(tool, f"tools[{i}]")
        elif kind == "namespace" and isinstance(tool.get("tools"), list):
            namespace = str(tool.get("name"))
            for j, inner in enumerate(tool["tools"]):
                for function in _function(inner, f"tools[{i}].tools[{j}]", namespace):
                    qualified = function["function"]["name"]
                    namespaced[qualified] = (namespace, qualified[len(namespace) + 1 :])
                    functions.append(function)
        else:
            raise BadRequest(
                f"tools[{i}]: {kind!r} tools are not supported here; give function tools", "tools"
            )
    choice = body.get("tool_choice")
    if isinstance(choice, dict):
        if choice.get("type") != "function":
            raise BadRequest(
                "'tool_choice' must be auto, none, required or {'type': 'function', 'name': ...}",
                "tool_choice",
            )
        choice = {"type": "function", "function": {"name": choice.get("name")}}
    return read_tools(
        {
            "tools": functions,
            "tool_choice": choice,
            "parallel_tool_calls": body.get("parallel_tool_calls"),
        }
    )


def _function(tool: Any, where: str, namespace: str = "") -> list[dict[str, Any]]:
    if not isinstance(tool, dict) or tool.get("type") != "function":
        raise BadRequest(f"{where} must be a function tool", "tools")
    if v.boolean(tool, "defer_loading", False):
        return []
    name = tool.get("name")
    if not isinstance(name, str) or not name:
        raise BadRequest(f"{where} needs a 'name'", "tools")
    if namespace:
        name = f"{namespace}{NAMESPACE_SEP}{name}"
    return [
        {
            "type": "function",
            "function": {
                "name": name,
                "description": tool.get("description") or "",
                "parameters": tool.get("parameters"),
            },
        }
    ]


def _format(text: v.JSON) -> Grammar | None:
    unknown = sorted(set(text) - {"format", "verbosity"})
    if unknown:
        raise BadRequest(f"'text.{unknown[0]}' is not supported here", "text")
    fmt = v.obj(text, "format")
    kind = fmt.get("type")
    if kind in (None, "text"):
        return None
    if kind == "json_object":
        return Grammar("json_schema", structured.ANY_OBJECT, "text")
    if kind == "json_schema" and isinstance(fmt.get("schema"), dict):
        return structured.schema_grammar(fmt["schema"], "text", fmt.get("strict") is True)
    raise BadRequest(
        "'text.format' must be text, json_object or {'type': 'json_schema', "
        "'name': ..., 'schema': {...}}",
        "text",
    )


# How a compaction item's summary (responses/compact.py made it) is put back in the prompt.
SUMMARY_HEAD = "A summary of the conversation so far, which replaces its earlier turns:\n\n"


def expand_compaction(item: dict[str, Any], where: str) -> str:
    """A `compaction` item, as POST /v1/responses/compact gave it: its summary, as a message.
    Its `encrypted_content` is this server's own plain summary, not OpenAI's ciphertext."""
    summary = item.get("encrypted_content")
    if not isinstance(summary, str) or not summary:
        raise BadRequest(f"{where}: a compaction item needs its 'encrypted_content'", "input")
    return SUMMARY_HEAD + summary
