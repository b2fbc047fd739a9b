"""Requests at and past the sizes a route takes, for tests/live/test_fuzz_faces.py: for every
route, each shape its kind of request can take (SHAPES), built from the route's base request
(fuzz_routes.py) with the details (which field, which character, which item) drawn by a
random.Random seeded with the fuzz seed, the route and the shape, so that each case is the same
whatever runs before it.

- A JSON body: a string filling the body to its route's limit; an array of 10^5 small items,
  or as many as fit; an object of 10^5 keys, or as many as fit; nesting exactly at the depth
  limit, one past it, and 10^5 deep; a body one byte past the limit.
- An upload: a file of lines filling the limit; 10^5 lines; a line nested past the depth limit;
  a file past the limit.
- A route that reads no body: a request line at aiohttp's limit (8,190 bytes) and past it, as
  many query parameters as fit, and a body at and past the 1 MiB limit all the same.
- Every route: a header past aiohttp's 8,190 bytes.
"""

from __future__ import annotations

import copy
import json
import random
from collections.abc import Iterator
from typing import Any

from localserve.server.http.bounded_json import MAX_DEPTH
from localserve.server.http.limits import SMALL_BODY
from tests.support.fuzz_cases import FIELDS, Case, batch_file, fill, form, headers_for
from tests.support.fuzz_routes import (
    BATCH_LINE,
    Route,
    base_of,
    body_limit,
    documented_fields,
    steer,
)

LINE_LIMIT = 8190  # aiohttp's most bytes of a request line or a header
MANY = 10**5
SHAPES = {
    "json": (
        "string-at-limit",
        "items-1e5",
        "keys-1e5",
        "depth-at-limit",
        "depth-past-limit",
        "depth-1e5",
        "body-past-limit",
        "header-past-limit",
    ),
    "form": (
        "file-at-limit",
        "lines-1e5",
        "depth-past-limit",
        "body-past-limit",
        "header-past-limit",
    ),
    "bare": (
        "target-at-line-limit",
        "target-past-line-limit",
        "query-at-line-limit",
        "body-at-limit",
        "body-past-limit",
        "header-past-limit",
    ),
}
# What a long string is made of: each is a different cost to the decoder, the tokenizer or
# the encoder (a lone surrogate is no UTF-8; a quote and a backslash are escaped).
FILLERS = ("a", "a ", "é", "\u2200", "\U0001f600", '"', "\\", "\n", "\ud800", "{", "0")
ITEMS: tuple[Any, ...] = (0, "a", None, {}, [], [1], {"role": "user", "content": "a"})
Path = tuple[Any, ...]  # keys and indexes, from the body down to a value


def grid(routes: list[Route]) -> Iterator[tuple[Route, str]]:
    for route in routes:
        for shape in SHAPES[base_of(route).kind]:
            yield route, shape


def large_case(route: Route, shape: str, seed: int) -> Case:
    rng = random.Random(f"{seed} {route} {shape}")
    base = base_of(route)
    headers = headers_for(route)
    target = fill(route, base.params)
    if shape == "header-past-limit":
        name = rng.choice(["X-Request-Id", "Authorization", "Origin", "X-Fuzz"])
        headers[name] = b"a" * (LINE_LIMIT + rng.randint(1, 10 * LINE_LIMIT))
        if base.kind == "form":
            return Case(route, target, form(dict(base.body or {}), batch_file()), headers)
        body = json.dumps(base.body).encode() if base.body is not None else b""
        return Case(route, target, body, headers, base.setup)
    if base.kind == "json":
        body = _json_body(route, shape, rng)
    elif base.kind == "form":
        body = _form_body(route, shape, rng)
    else:
        target, body = _bare(route, shape, rng)
    return Case(route, target, body, headers, base.setup)


# -- JSON bodies ---------------------------------------------------------------------------------


def _json_body(route: Route, shape: str, rng: random.Random) -> bytes:
    limit = body_limit(route)
    body = copy.deepcopy(base_of(route).body or {})
    steer(route, body)
    ascii_only = rng.random() < 0.5
    held, fields = _slots(route, body)
    slot = rng.choice(held if held and rng.random() < 0.5 else fields)
    if shape == "body-past-limit":
        return _padded(body, limit + 1, rng)
    if shape == "depth-1e5":
        text = _dumps(body, ascii_only)
        deep = "[" * MANY + "]" * MANY
        return (text[:-1] + (", " if body else "") + f'"{slot[0]}": {deep}' + "}").encode()
    if shape in ("depth-at-limit", "depth-past-limit"):
        depth = MAX_DEPTH - len(slot) + (shape == "depth-past-limit")
        _put(body, slot, _nested(depth, rng))
        steer(route, body)
        return _dumps(body, ascii_only).encode("utf-8", "surrogatepass")
    _put(body, slot, "")
    steer(route, body)
    # Steered again once the value is in: room for what that may add (a num_predict).
    room = limit - len(_dumps(body, ascii_only).encode("utf-8", "surrogatepass"))
    room -= 64 + rng.randint(0, 64)
    if shape == "string-at-limit":
        filler = rng.choice(FILLERS)
        _put(body, slot, filler * (room // _size(filler, ascii_only)))
    elif shape == "items-1e5":
        item = rng.choice(ITEMS)
        _put(body, slot, [item] * min(MANY, room // (_size(item, ascii_only) + 2)))
    else:  # keys-1e5: as logit_bias, options or metadata hold them
        value = rng.choice([0, -100, "a", None, True])
        each = _size({str(MANY): value}, ascii_only) + 1
        _put(body, slot, {str(i): value for i in range(min(MANY, room // each))})
    steer(route, body)
    return _dumps(body, ascii_only).encode("utf-8", "surrogatepass")


def _slots(route: Route, body: dict[str, Any]) -> tuple[list[Path], list[Path]]:
    """Where a large value goes: in place of a string or an array the base body holds (a
    prompt, a message's content), or in a field at the top (one the route documents, else
    one the faces read)."""
    slots: list[Path] = []

    def walk(value: Any, path: Path) -> None:
        if path and isinstance(value, (str, list)):
            slots.append(path)
        if isinstance(value, (dict, list)):
            for key, inner in value.items() if isinstance(value, dict) else enumerate(value):
                walk(inner, (*path, key))

    walk(body, ())
    return slots, [(name,) for name in documented_fields(route) or FIELDS]


def _put(body: dict[str, Any], path: Path, value: Any) -> None:
    holder: Any = body
    for key in path[:-1]:
        holder = holder[key]
    holder[path[-1]] = value


def _nested(depth: int, rng: random.Random) -> Any:
    """A value `depth` levels deep: arrays, objects, or both in turn."""
    kind = rng.choice(["array", "object", "both"])
    value: Any = [] if kind != "object" else {}
    for level in range(depth - 1):
        array = kind == "array" or (kind == "both" and level % 2 == 0)
        value = [value] if array else {"a": value}
    return value


def _dumps(value: Any, ascii_only: bool) -> str:
    return json.dumps(value, ensure_ascii=ascii_only)


def _size(value: Any, ascii_only: bool) -> int:
    """Bytes `value` adds as JSON (a string's quotes aside)."""
    size = len(_dumps(value, ascii_only).encode("utf-8", "surrogatepass"))
    return size - 2 if isinstance(value, str) else size


def _padded(body: dict[str, Any], size: int, rng: random.Random) -> bytes:
    """`body` grown to `size` bytes: by trailing spaces (still valid JSON) or a long field."""
    text = _dumps(body, True).encode()
    if rng.random() < 0.5:
        return text + b" " * (size - len(text))
    comma = b", " if body else b""
    pad = size - len(text) - len(comma + b'"pad": ""')
    return text[:-1] + comma + b'"pad": "' + b"a" * pad + b'"}'


# -- uploads -------------------------------------------------------------------------------------


def _form_body(route: Route, shape: str, rng: random.Random) -> bytes:
    limit = body_limit(route)
    fields = dict(base_of(route).body or {})
    line = batch_file()
    if shape == "file-at-limit":
        if rng.random() < 0.5:  # many lines
            file = line * ((limit - 1024) // len(line))
        else:  # one long line
            long = copy.deepcopy(BATCH_LINE)
            long["body"]["messages"][0]["content"] = "a" * (limit - 1024)
            file = json.dumps(long).encode()
    elif shape == "lines-1e5":
        file = rng.choice([b"\n" * MANY + line, b"{}\n" * MANY, b"1\n" * MANY])
    elif shape == "depth-past-limit":
        deep = copy.deepcopy(BATCH_LINE)
        deep["body"]["metadata"] = _nested(MAX_DEPTH, rng)
        file = json.dumps(deep).encode()
    else:  # body-past-limit: a file past the limit, or a body past the limit and a chunk
        size = rng.choice([limit + 1, limit + (1 << 16) + 1])
        file = (line * (size // len(line) + 1))[:size]
    return form(fields, file)


# -- routes that read no body --------------------------------------------------------------------


def _bare(route: Route, shape: str, rng: random.Random) -> tuple[str, bytes]:
    base = base_of(route)
    room = LINE_LIMIT - len(f"{route.method}  HTTP/1.1") - len(fill(route, base.params)) - 8
    if shape.startswith("target-"):
        size = room if shape == "target-at-line-limit" else rng.randint(LINE_LIMIT + 1, MANY)
        if base.params and rng.random() < 0.5:
            name = rng.choice(sorted(base.params))
            return fill(route, {**base.params, name: "a" * size}), b""
        return fill(route, base.params, "q=" + "a" * (size - 2)), b""
    if shape == "query-at-line-limit":
        query = "&".join(f"a{i}=1" for i in range(room // 8))[:room].rstrip("&")
        return fill(route, base.params, query), b""
    size = SMALL_BODY if shape == "body-at-limit" else SMALL_BODY + 1
    return fill(route, base.params), _padded({}, size, rng)
