"""A wire body declared once (`Body`): each field's JSON Schema, which /openapi.json shows, and
its reader, which the face validates the request with (server/http/validation.py's readers,
whose 400s name the field). The document and the face hold the same object, so what one says
the other does: tests/unit/server/wire/test_declarations.py sends each declared bound.

A field may also name the sampling parameter it fills (`to`): `Body.sampling` is the one
builder of SamplingParams from any face's body.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from localserve.ground.errors import BadRequest
from localserve.ground.sampling import SamplingParams
from localserve.server.http import validation as v
from localserve.server.wire import shapes
from localserve.server.wire.shapes import Schema

JSON = dict[str, Any]
Reader = Callable[[JSON, str], Any]


@dataclass(frozen=True)
class Field:
    """One field: its schema, its reader (None: read together with another field, whose reader
    names it), and the sampling parameter its value fills, if any."""

    schema: Schema
    read: Reader | None = None
    to: str | None = None


def number(
    lo: float, hi: float, default: float | None = None, doc: str = "", to: str | None = None
) -> Field:
    def read(body: JSON, key: str) -> float | None:
        return v.number(body, key, default, lo, hi)

    return Field(shapes.number(lo, hi, default, doc), read, to)


def integer(
    lo: int, hi: int, default: int | None = None, doc: str = "", to: str | None = None
) -> Field:
    def read(body: JSON, key: str) -> int | None:
        return v.integer(body, key, default, lo, hi)

    return Field(shapes.integer(lo, hi, default, doc), read, to)


def boolean(default: bool, doc: str = "", to: str | None = None) -> Field:
    def read(body: JSON, key: str) -> bool:
        return v.boolean(body, key, default)

    return Field(shapes.boolean(default, doc), read, to)


def text(doc: str = "", **more: Any) -> Field:
    return Field(shapes.text(doc, **more), v.string)


@dataclass(frozen=True)
class Body:
    """A request body: its fields in the order they are read (the first bad one is the 400),
    those it requires, and what more its schema says (a choice of required fields)."""

    name: str
    fields: Mapping[str, Field]
    required: tuple[str, ...] = ()
    more: Mapping[str, Any] = field(default_factory=dict)
    closed: bool = False  # a field it does not declare is a 400, not ignored

    def schema(self) -> Schema:
        properties = {key: f.schema for key, f in self.fields.items()}
        more = {**self.more, "additionalProperties": False} if self.closed else self.more
        return shapes.obj(properties, self.required, **more)

    def read(self, body: JSON) -> dict[str, Any]:
        """Every field's value as its reader gives it (its default where the body has none)."""
        unknown = sorted(set(body) - set(self.fields)) if self.closed else []
        if unknown:
            raise BadRequest(f"'{unknown[0]}' is not supported here", unknown[0])
        return {key: f.read(body, key) for key, f in self.fields.items() if f.read is not None}

    def sampling(self, got: Mapping[str, Any], **more: Any) -> SamplingParams:
        """The sampling the body asks for: each field's value where it names a parameter (the
        first one given, of two that fill the same), then `more`; absent ones keep
        SamplingParams' defaults."""
        kwargs: dict[str, Any] = {}
        for key, f in self.fields.items():
            if f.to is not None and f.to not in kwargs and got.get(key) is not None:
                kwargs[f.to] = got[key]
        return SamplingParams(**{**kwargs, **more})


def nested(body: Body, doc: str = "") -> Field:
    """An object field declared as a body of its own (Ollama's `options`): its values, read
    from `{}` when the request has none."""

    def read(outer: JSON, key: str) -> dict[str, Any]:
        return body.read(v.obj(outer, key))

    schema = shapes.nullable(body.schema())
    if doc:
        schema["description"] = doc
    return Field(schema, read)
