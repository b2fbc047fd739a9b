"""Tool calls as every face asks for them: the request's tools and tool_choice, and the
history's calls and results as the chat template expects them.

The tools and the history go through the model's own template when formats/call_syntax.py reads
its call syntax off it; any other model gets GENERIC_PROMPT, a system message, and answers in
the generic JSON format, as llama.cpp's server does for templates without tool support. The
grammar that makes the answer's calls valid is server/chat/call_grammar.py's.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from localserve.ground.call_formats import SLOTS, CallFormat
from localserve.ground.errors import BadRequest
from localserve.server.http import bounded_json
from localserve.server.http import validation as v

FIELD = "tools"
GENERIC_PROMPT = (
    "You can call tools. Each is listed with a JSON Schema of its arguments:\n{tools}\n"
    "To call tools, answer with only a JSON object of this form:\n"
    '{{"tool_calls": [{{"name": "<a tool\'s name>", "arguments": {{<its arguments>}}}}]}}\n'
    "{rule}"
)
_RULES = {
    "auto": "Otherwise, answer in plain text.",
    "required": "Answer with a tool call.",
    "function": "Call the tool {name}.",
}


@dataclass(frozen=True)
class Function:
    name: str
    description: str
    parameters: dict[str, Any]

    def as_tool(self) -> dict[str, Any]:
        """The function as Hugging Face templates take it in `tools`."""
        function = {
            "name": self.name,
            "description": self.description,
            "parameters": self.parameters,
        }
        return {"type": "function", "function": function}


@dataclass(frozen=True)
class ToolRequest:
    functions: tuple[Function, ...]
    choice: str  # "auto", "required", or "function" (then `named` is its name)
    named: str | None = None
    parallel: bool = True

    @property
    def offered(self) -> tuple[Function, ...]:
        """The functions the answer may call."""
        if self.choice == "function":
            return tuple(f for f in self.functions if f.name == self.named)
        return self.functions


def read_tools(body: v.JSON) -> ToolRequest | None:
    """`tools`, `tool_choice` and `parallel_tool_calls` (Ollama sends only `tools`); None when
    no tool may be called (none given, or tool_choice "none")."""
    tools = body.get("tools")
    if tools is None or tools == []:
        # A call required of no tools cannot be honoured: refused, never a free answer (a
        # named function is refused by _choice, as not in the tools).
        if _choice(body.get("tool_choice"), [])[0] == "required":
            raise BadRequest(
                "'tool_choice' requires a tool call, but no tools are given", "tool_choice"
            )
        return None
    if not isinstance(tools, list):
        raise BadRequest("'tools' must be a list of tools", FIELD)
    functions = tuple(_function(t, i) for i, t in enumerate(tools))
    names = [f.name for f in functions]
    if len(set(names)) != len(names):
        raise BadRequest("two tools have the same name", FIELD)
    choice, named = _choice(body.get("tool_choice"), names)
    if choice == "none":
        return None
    parallel = v.boolean(body, "parallel_tool_calls", True)
    return ToolRequest(functions, choice, named, parallel)


def _function(tool: Any, i: int) -> Function:
    where = f"tools[{i}]"
    if not isinstance(tool, dict) or tool.get("type", "function") != "function":
        raise BadRequest(f"{where} must be {{'type': 'function', 'function': {{...}}}}", FIELD)
    spec = tool.get("function")
    if not isinstance(spec, dict) or not isinstance(spec.get("name"), str) or not spec["name"]:
        raise BadRequest(f"{where}.function must be an object with a 'name'", FIELD)
    parameters = spec.get("parameters")
    if parameters is None:
        parameters = {"type": "object", "properties": {}}
    if not isinstance(parameters, dict):
        raise BadRequest(f"{where}.function.parameters must be a JSON Schema object", FIELD)
    description = spec.get("description") or ""
    return Function(spec["name"], str(description), parameters)


def _choice(choice: Any, names: list[str]) -> tuple[str, str | None]:
    if choice is None:
        return "auto", None
    if choice in ("auto", "none", "required"):
        return choice, None
    function = choice.get("function") if isinstance(choice, dict) else None
    name = function.get("name") if isinstance(function, dict) else None
    if not isinstance(name, str):
        raise BadRequest(
            "'tool_choice' must be 'auto', 'none', 'required' or "
            "{'type': 'function', 'function': {'name': ...}}",
            "tool_choice",
        )
    if name not in names:
        raise BadRequest(f"'tool_choice' names '{name}', which is not in 'tools'", "tool_choice")
    return "function", name


# -- the history -------------------------------------------------------------------------------


def history(messages: list[dict[str, Any]], fmt: CallFormat) -> list[dict[str, Any]]:
    """Earlier calls and their results as the template reads them: calls with arguments as
    objects (Hugging Face's convention), results with the tool's name. A template without tool
    support reads the calls as the generic JSON and the results as user turns, consecutive
    results in one turn (templates such as Gemma's insist that roles alternate)."""
    names: dict[str, str] = {}
    out: list[dict[str, Any]] = []
    for i, m in enumerate(messages):
        calls = m.get("tool_calls")
        if m["role"] == "assistant" and calls:
            m = {**m, "tool_calls": [_past_call(c, i, j) for j, c in enumerate(_list(calls, i))]}
            names.update((c["id"], c["function"]["name"]) for c in m["tool_calls"] if c["id"])
            if not fmt.native:
                m = _generic_call_turn(m)
        elif m["role"] == "tool":
            call_id = m.get("tool_call_id") or ""
            if not isinstance(call_id, str):
                raise BadRequest(f"messages[{i}].tool_call_id must be a string", "messages")
            name = m.get("tool_name") or m.get("name") or names.get(call_id)
            m = {**m, "name": name or ""}
            if not fmt.native:
                result = _generic_result_turn(m, out)
                if result is None:
                    continue
                m = result
        out.append(m)
    return out


def _list(calls: Any, i: int) -> list[Any]:
    if not isinstance(calls, list):
        raise BadRequest(f"messages[{i}].tool_calls must be a list", "messages")
    return calls


def _past_call(call: Any, i: int, j: int) -> dict[str, Any]:
    where = f"messages[{i}].tool_calls[{j}]"
    spec = call.get("function") if isinstance(call, dict) else None
    if not isinstance(spec, dict) or not isinstance(spec.get("name"), str):
        raise BadRequest(f"{where} must have a function with a 'name'", "messages")
    arguments = spec.get("arguments") or {}
    if isinstance(arguments, str):  # OpenAI sends them as JSON text, Ollama as an object
        try:
            arguments = bounded_json.loads(arguments) if arguments.strip() else {}
        except bounded_json.BadJSON as exc:
            raise BadRequest(f"{where}.function.arguments {exc}", "messages") from None
        # JSON inside a string may escape what the body's own check could not see.
        v.require_text(arguments, f"{where}.function.arguments", "messages")
    call_id = call.get("id") or ""
    if not isinstance(call_id, str):
        raise BadRequest(f"{where}.id must be a string", "messages")
    function = {"name": spec["name"], "arguments": arguments}
    return {"id": call_id, "type": "function", "function": function}


def _generic_call_turn(m: dict[str, Any]) -> dict[str, Any]:
    calls = [
        {"name": c["function"]["name"], "arguments": c["function"]["arguments"]}
        for c in m["tool_calls"]
    ]
    text = json.dumps({"tool_calls": calls}, ensure_ascii=False)
    content = f"{m['content']}\n{text}" if m.get("content") else text
    return {"role": "assistant", "content": content}


def _generic_result_turn(m: dict[str, Any], out: list[dict[str, Any]]) -> dict[str, Any] | None:
    """A user turn carrying the result; None when it joined the previous result's turn."""
    result = json.dumps(
        {"tool_response": {"name": m["name"], "content": m.get("content", "")}}, ensure_ascii=False
    )
    if out and out[-1].get("tool_results"):
        out[-1] = {**out[-1], "content": out[-1]["content"] + "\n" + result}
        return None
    return {"role": "user", "content": result, "tool_results": True}


def with_tools_listed(
    messages: list[dict[str, Any]], tools: ToolRequest, fmt: CallFormat
) -> list[dict[str, Any]]:
    """The tools, listed in the system message, for a template that writes calls but leaves
    listing the tools to the caller (DeepSeek V3.1's), with a call in its own syntax."""
    example = fmt.first + "<name>" + fmt.name_close
    example += '{"<argument>": <value>}' if fmt.args == "json" else ""
    example += fmt.call_close + fmt.close
    for slot in SLOTS:
        example = example.replace(slot, "0")
    prompt = (
        "You can call tools. Each is listed with a JSON Schema of its arguments:\n"
        f"{_listing(tools)}\nTo call one, write:\n{example}\n{_rule(tools)}"
    )
    return _with_system(messages, prompt)


def with_generic_prompt(messages: list[dict[str, Any]], tools: ToolRequest) -> list[dict[str, Any]]:
    """GENERIC_PROMPT, added to the system message (or as one) for a template without tools."""
    prompt = GENERIC_PROMPT.format(tools=_listing(tools), rule=_rule(tools))
    return _with_system(messages, prompt)


def _listing(tools: ToolRequest) -> str:
    """The offered functions, one JSON object a line."""
    return "\n".join(json.dumps(f.as_tool()["function"], ensure_ascii=False) for f in tools.offered)


def _rule(tools: ToolRequest) -> str:
    return _RULES[tools.choice].format(name=tools.named)


def _with_system(messages: list[dict[str, Any]], prompt: str) -> list[dict[str, Any]]:
    if messages and messages[0]["role"] == "system":
        first = messages[0]
        return [{**first, "content": f"{first['content']}\n\n{prompt}"}, *messages[1:]]
    return [{"role": "system", "content": prompt}, *messages]
