"""Structured output as each face asks for it, read into one JSON Schema grammar that the
daemon checks (server/chat/grammar_pool.py) and the worker compiles (backends/guides.py):
OpenAI's `response_format` and Ollama's `format`. JSON mode, in both, is a schema too: any
JSON object.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, cast

from localserve.ground.errors import BadRequest
from localserve.ground.sampling import JSON_STYLE, Grammar
from localserve.server.http import validation as v

if TYPE_CHECKING:
    from llguidance._lib import JsonCompileOptions

ANY_OBJECT = json.dumps({"type": "object"})
# Where a schema holds more schemas: by name, a list of them, or a map of names to them.
_ONE = ("items", "additionalProperties", "not", "contains", "if", "then", "else")
_LIST = ("anyOf", "oneOf", "prefixItems")
_MAP = ("properties", "$defs", "definitions")
_OPEN_ENDED = ("additionalProperties", "patternProperties", "unevaluatedProperties")


def closed(schema: Any, merged: bool = False) -> Any:
    """The schema with every object that lists its `properties` and says nothing of others
    closed to them (`additionalProperties: false`), as llama.cpp's grammar converter reads it:
    left open, a 135M model fills a call's arguments with keys of its own. An object that is
    one part of an `allOf` stays as written, since its siblings may add properties."""
    if not isinstance(schema, dict):
        return schema
    out = dict(schema)
    for key in _ONE:
        if isinstance(out.get(key), dict):
            out[key] = closed(out[key])
    for key in _LIST:
        if isinstance(out.get(key), list):
            out[key] = [closed(s) for s in out[key]]
    for key in _MAP:
        if isinstance(out.get(key), dict):
            out[key] = {name: closed(s) for name, s in out[key].items()}
    if isinstance(out.get("allOf"), list):
        out["allOf"] = [closed(s, merged=True) for s in out["allOf"]]
    open_ended = any(key in out for key in _OPEN_ENDED)
    if not merged and isinstance(out.get("properties"), dict) and not open_ended:
        out["additionalProperties"] = False
    return out


def _schema(text: str, field: str, strict: bool = False) -> Grammar:
    return Grammar("json_schema", text, field, strict)


def schema_grammar(schema: dict[str, Any], field: str, strict: bool = False) -> Grammar:
    """A JSON Schema a client sent, closed as `closed` says, as the answer's grammar."""
    return _schema(json.dumps(closed(schema)), field, strict)


def from_response_format(body: v.JSON) -> Grammar | None:
    """OpenAI: `{"type": "text" | "json_object" | "json_schema", "json_schema": {...}}`."""
    fmt = body.get("response_format")
    if fmt is None:
        return None
    if not isinstance(fmt, dict):
        raise BadRequest("'response_format' must be an object with a 'type'", "response_format")
    kind = fmt.get("type")
    if kind == "text":
        return None
    if kind == "json_object":
        return _schema(ANY_OBJECT, "response_format")
    if kind == "json_schema":
        spec = fmt.get("json_schema")
        schema = spec.get("schema") if isinstance(spec, dict) else None
        if not isinstance(schema, dict):
            raise BadRequest(
                "'response_format.json_schema.schema' must be a JSON Schema object",
                "response_format",
            )
        strict = isinstance(spec, dict) and spec.get("strict") is True
        return schema_grammar(schema, "response_format", strict)
    raise BadRequest(
        f"'response_format.type' must be 'text', 'json_object' or 'json_schema', not {kind!r}",
        "response_format",
    )


def from_format(body: v.JSON) -> Grammar | None:
    """Ollama: `format: "json"` or a JSON Schema object."""
    fmt = body.get("format")
    if fmt in (None, ""):
        return None
    if fmt == "json":
        return _schema(ANY_OBJECT, "format")
    if isinstance(fmt, dict):
        return schema_grammar(fmt, "format")
    raise BadRequest(f"'format' must be \"json\" or a JSON Schema object, not {fmt!r}", "format")


UNENFORCED_HEADER = "X-Localserve-Unenforced"
UNCONSTRAINED_HEADER = "X-Localserve-Unconstrained"
_HEADER_TEXT = 400  # characters of llguidance's words a header carries at most


def unenforced(grammar: Grammar) -> tuple[tuple[str, ...], str | None]:
    """What llguidance leaves unenforced in a lenient grammar (its warnings: `Unimplemented
    keys: ["propertyNames"]`, `Unknown format: ...`), and why it cannot compile it at all, if it
    cannot. Blocking (a compile, milliseconds for an agent's two dozen tools, with no bound of
    its own): the daemon runs it in its compiling pool, with a deadline, once per grammar
    (server/chat/grammar_pool.py). The answer is tuples, which the pool's cache shares."""
    import llguidance

    try:
        if grammar.kind == "lark":
            compiled = llguidance.LLMatcher.grammar_from_lark(grammar.text)
        else:
            style = cast("JsonCompileOptions", {**JSON_STYLE, "lenient": not grammar.strict})
            compiled = llguidance.LLMatcher.grammar_from_json_schema(grammar.text, overrides=style)
        failed, said = llguidance.LLMatcher.validate_grammar_with_warnings(compiled)
    except (ValueError, TypeError, RuntimeError) as exc:
        return (), str(exc)
    return ((), "; ".join(said)) if failed else ((*grammar.dropped, *said), None)


def header_text(words: str) -> str:
    """llguidance's words as a header value: one line of printable ASCII (a schema's format
    names are the client's own text)."""
    plain = "".join(c if " " <= c <= "~" else "?" for c in " ".join(words.split()))
    return plain[:_HEADER_TEXT]
