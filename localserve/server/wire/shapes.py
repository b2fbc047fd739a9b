"""The builders every schema of /openapi.json is written with, and the scalars they share."""

from __future__ import annotations

from typing import Any

Schema = dict[str, Any]

# -- helpers -----------------------------------------------------------------------------------


def ref(name: str) -> Schema:
    return {"$ref": f"#/components/schemas/{name}"}


def nullable(schema: Schema) -> Schema:
    """The schema, or null (an optional field's "not given")."""
    kind = schema.get("type")
    if isinstance(kind, str):
        return {**schema, "type": [kind, "null"]}
    return {"anyOf": [schema, {"type": "null"}]}


def _scalar(kind: str, default: Any, doc: str, **more: Any) -> Schema:
    schema: Schema = {"type": [kind, "null"], **more}
    if default is not None:
        schema["default"] = default
    if doc:
        schema["description"] = doc
    return schema


def number(lo: float, hi: float, default: float | None = None, doc: str = "") -> Schema:
    return _scalar("number", default, doc, minimum=lo, maximum=hi)


def integer(lo: int, hi: int, default: int | None = None, doc: str = "") -> Schema:
    return _scalar("integer", default, doc, minimum=lo, maximum=hi)


def boolean(default: bool | None = None, doc: str = "") -> Schema:
    return _scalar("boolean", default, doc)


def text(doc: str = "", **more: Any) -> Schema:
    return _scalar("string", None, doc, **more)


def obj(properties: dict[str, Schema], required: tuple[str, ...] = (), **more: Any) -> Schema:
    schema: Schema = {"type": "object", "properties": properties, **more}
    if required:
        schema["required"] = list(required)
    return schema


def array(items: Schema, **more: Any) -> Schema:
    return {"type": "array", "items": items, **more}


def one_of(*schemas: Schema, **more: Any) -> Schema:
    return {"anyOf": list(schemas), **more}


STRING: Schema = {"type": "string"}
INT: Schema = {"type": "integer"}
NAT: Schema = {"type": "integer", "minimum": 0}
FREE_OBJECT: Schema = {"type": "object"}

NULL: Schema = {"type": "null"}


def fixed(properties: dict[str, Schema], *optional: str) -> Schema:
    """An answer's object: every property but the optional ones is always there."""
    return obj(properties, tuple(k for k in properties if k not in optional))
