"""Structured output as each face asks for it, read into one JSON Schema grammar that the
worker compiles (backends/guides.py): OpenAI's `response_format` and Ollama's `format`. JSON
mode, in both, is a schema too: any JSON object.
"""

from __future__ import annotations

import json

from localserve.ground.errors import BadRequest
from localserve.ground.sampling import Grammar
from localserve.server import validation as v

ANY_OBJECT = json.dumps({"type": "object"})


def _schema(text: str, field: str) -> Grammar:
    return Grammar("json_schema", text, field)


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
            raise BadRequest("'response_format.json_schema.schema' must be a JSON Schema object",
                             "response_format")  # fmt: skip
        return _schema(json.dumps(schema), "response_format")
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
        return _schema(json.dumps(fmt), "format")
    raise BadRequest(f"'format' must be \"json\" or a JSON Schema object, not {fmt!r}", "format")
