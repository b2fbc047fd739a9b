"""The grammar that makes an answer's calls valid, written in the model's own call syntax
(ground/call_formats.py): an llguidance Lark grammar (backends/guides.py).

`required` or a named function constrain the whole answer to calls, after the text the
template writes before them (closing an open reasoning block, or Qwen3's empty one), so a call
is never inside a thought. `auto` leaves text free until a call's trigger (a lazy lexeme, as
llama.cpp's lazy grammars), then constrains the call. Either way every call names a given
function, with arguments its JSON Schema accepts: one JSON object, or one parameter after
another, a string as free text up to the parameter's closing and any other value as JSON.
"""

from __future__ import annotations

import json
from typing import Any

from localserve.ground.call_formats import ID_SLOT, INDEX_SLOT, CallFormat
from localserve.ground.sampling import JSON_STYLE, Grammar
from localserve.server.chat.structured import closed

FIELD = "tools"
_SLOT_RULES = {ID_SLOT: "/[A-Za-z0-9]{9}/", INDEX_SLOT: "/[0-9]{1,3}/"}
_KEY = r"/[A-Za-z_][A-Za-z0-9_.\-]*/"


def lit(text: str) -> str:
    """A literal of the grammar; an id or index slot in it becomes its pattern."""
    parts: list[str] = []
    piece = ""
    for ch in text:
        if ch in _SLOT_RULES:
            if piece:
                parts.append(json.dumps(piece))
            parts.append(_SLOT_RULES[ch])
            piece = ""
        else:
            piece += ch
    if piece or not parts:
        parts.append(json.dumps(piece))
    return " ".join(parts)


def grammar(
    functions: list[tuple[str, dict[str, Any]]],
    choice: str,
    parallel: bool,
    fmt: CallFormat,
    lead: str,
) -> Grammar:
    """The calls of `functions` (name, JSON Schema of the arguments) as `fmt` writes them;
    `choice` "auto" leaves the answer free up to a call, any other forces calls after
    `lead`."""
    rules = ["%llguidance {}", r"TEXT: /(.|\n)*/"]
    dropped: list[str] = []
    for i, (name, schema) in enumerate(functions):
        rules += _function(i, name, schema, fmt, dropped)
    rules.append("body: " + " | ".join(f"fn_{i}" for i in range(len(functions))))
    more = (
        f" ({lit(fmt.call_close + fmt.sep + fmt.call_open)} body)*"
        if parallel and fmt.parallel
        else ""
    )
    rules.append(f"calls: body{more} {lit(fmt.call_close + fmt.close)}")
    first = fmt.first
    if choice == "auto":
        trigger = fmt.trigger
        rest = first.lstrip()[len(trigger) :]
        rules += [
            "start: block* tail",
            "tail: TEXT",
            f"trigger[lazy]: TEXT {lit(trigger)}",
            f"block: trigger {lit(rest) if rest else ''} calls",
        ]
    else:
        rules.append(f"start: {lit(lead + first)} calls")
    return Grammar("lark", "\n".join(rules) + "\n", FIELD, dropped=tuple(dropped))


def _function(
    i: int, name: str, schema: dict[str, Any], fmt: CallFormat, dropped: list[str]
) -> list[str]:
    head = f"fn_{i}: {lit(name + fmt.name_close)}"
    if fmt.args == "json":
        return [f"{head} {_json(schema)}"]
    properties = schema.get("properties")
    if not isinstance(properties, dict) or not properties:
        # No named parameters: any keys, each value free text (what the schema leaves open).
        param = f"{lit(fmt.param_open)} {_KEY} {lit(fmt.param_mid)} value_{i}"
        return [
            f"{head} (param_{i} ({lit(fmt.param_sep)} param_{i})*)?",
            f"param_{i}: {param}",
            f"value_{i}[lazy]: TEXT {lit(fmt.param_close)}",
        ]
    required = set(schema.get("required") or ())
    rules = [f"{head} head_{i}_0"]
    keys = list(properties)
    for j, key in enumerate(keys):
        rules += _param(f"{i}_{j}", key, properties[key], fmt)
        dropped += [f"{name}.{key}: {word}" for word in _unwritten(properties[key])]
        nxt = f"{i}_{j + 1}"
        sep = lit(fmt.param_sep) if fmt.param_sep else ""
        if key in required:
            rules.append(f"head_{i}_{j}: p_{i}_{j} tail_{nxt}")
            rules.append(f"tail_{i}_{j}: {sep} p_{i}_{j} tail_{nxt}")
        else:
            rules.append(f"head_{i}_{j}: p_{i}_{j} tail_{nxt} | head_{nxt}")
            rules.append(f"tail_{i}_{j}: {sep} p_{i}_{j} tail_{nxt} | tail_{nxt}")
    end = f"{i}_{len(keys)}"
    rules += [f'head_{end}: ""', f'tail_{end}: ""']
    return rules


def _param(at: str, key: str, schema: Any, fmt: CallFormat) -> list[str]:
    opening = f"p_{at}: {lit(fmt.param_open + key)}"
    if is_text(schema):
        enum = schema.get("enum") if isinstance(schema, dict) else None
        if isinstance(enum, list) and enum and all(isinstance(e, str) for e in enum):
            values = " | ".join(lit(e) for e in enum)
            return [f"{opening} {lit(fmt.param_mid)} ({values}) {lit(fmt.param_close)}"]
        const = schema.get("const") if isinstance(schema, dict) else None
        if isinstance(const, str):
            return [f"{opening} {lit(fmt.param_mid)} {lit(const)} {lit(fmt.param_close)}"]
        return [
            f"{opening} {lit(fmt.param_mid)} v_{at}",
            f"v_{at}[lazy]: {_text_length(schema)} {lit(fmt.param_close)}",
        ]
    close = lit(fmt.param_close_other) if fmt.param_close_other else ""
    return [f"{opening} {lit(fmt.param_mid_other)} {_json(schema)} {close}"]


# What a parameter written as text enforces of its schema; any other keyword is reported.
_TEXT_KEYWORDS = frozenset(
    {
        "type",
        "enum",
        "const",
        "minLength",
        "maxLength",
        "description",
        "title",
        "default",
        "examples",
    }
)


def _text_length(schema: dict[str, Any]) -> str:
    """A text value's characters, as many as minLength and maxLength allow."""
    low, high = schema.get("minLength"), schema.get("maxLength")
    low = low if isinstance(low, int) and low > 0 else 0
    high = high if isinstance(high, int) and high >= low else None
    if not low and high is None:
        return "TEXT"
    return "/(.|\\n){" + f"{low},{'' if high is None else high}" + "}/"


def _unwritten(schema: Any) -> list[str]:
    """The keywords of a text parameter's schema its grammar does not enforce."""
    if not is_text(schema):
        return []
    return sorted(k for k in schema if k not in _TEXT_KEYWORDS)


def text_params(functions: list[tuple[str, dict[str, Any]]]) -> dict[str, set[str]]:
    """Each function's parameters that its calls write as text, as the grammar writes them
    (for the parser, which reads such a value as it stands and any other as JSON)."""
    found: dict[str, set[str]] = {}
    for name, schema in functions:
        properties = schema.get("properties")
        items = properties.items() if isinstance(properties, dict) else ()
        found[name] = {key for key, value in items if is_text(value)}
    return found


def is_text(schema: Any) -> bool:
    """A parameter written as plain text: one whose schema says it is a string."""
    return isinstance(schema, dict) and schema.get("type") == "string"


def _json(schema: Any) -> str:
    # Lenient: a keyword llguidance lacks (Claude Code's `propertyNames`) goes unenforced,
    # reported (server/chat/structured.py's `unenforced`), rather than refuse the request.
    base = closed(schema) if isinstance(schema, dict) else {}
    return "%json " + json.dumps({**base, "x-guidance": {**JSON_STYLE, "lenient": True}})
