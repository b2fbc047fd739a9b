"""Typed reads of request fields: a wrong type or range becomes a BadRequest naming the field."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, overload

from localserve.ground.errors import BadRequest

JSON = dict[str, Any]


def require_text(value: Any, where: str, field: str | None = None) -> None:
    """Every string in `value` (keys too) is text that UTF-8 can carry. JSON may escape a lone
    UTF-16 surrogate ("\\ud800"), which parses but which no tokenizer, log or answer can
    encode: it is the client's mistake, a 400 naming it, never a 500 from deep inside."""
    try:
        json.dumps(value, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError as exc:
        code = ord(exc.object[exc.start])
        raise BadRequest(
            f"{where} is not valid text: it holds a lone UTF-16 surrogate (\\u{code:04x}), "
            "which no UTF-8 text can carry; send the character itself, or both halves of "
            "its surrogate pair",
            field,
        ) from None


@overload
def number(body: JSON, key: str, default: float, lo: float, hi: float) -> float: ...
@overload
def number(body: JSON, key: str, default: float | None, lo: float, hi: float) -> float | None: ...
def number(body: JSON, key: str, default: float | None, lo: float, hi: float) -> float | None:
    value = body.get(key)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise BadRequest(f"'{key}' must be a number, got {type(value).__name__}", key)
    if not lo <= value <= hi:
        raise BadRequest(f"'{key}' must be between {lo} and {hi}, got {value}", key)
    return float(value)


def integer(body: JSON, key: str, default: int | None, lo: int, hi: int) -> int | None:
    value = body.get(key)
    if value is None:
        return default
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise BadRequest(f"'{key}' must be an integer, got {type(value).__name__}", key)
    if not lo <= value <= hi:
        raise BadRequest(f"'{key}' must be between {lo} and {hi}, got {value}", key)
    return value


# The most draft tokens a request may ask a step to verify (engine/batching/drafts.py).
MAX_DRAFT_TOKENS = 64


def draft_tokens(body: JSON, key: str = "speculative") -> int | None:
    """A request's speculative decoding: a count of draft tokens per step, false for none, true
    or absent for the server's --speculative."""
    value = body.get(key)
    if value is None or value is True:
        return None
    if value is False:
        return 0
    return integer(body, key, None, 0, MAX_DRAFT_TOKENS)


def boolean(body: JSON, key: str, default: bool) -> bool:
    value = body.get(key)
    if value is None:
        return default
    if not isinstance(value, bool):
        raise BadRequest(f"'{key}' must be true or false, got {type(value).__name__}", key)
    return value


def string(body: JSON, key: str, required: bool = False) -> str | None:
    value = body.get(key)
    if value is None:
        if required:
            raise BadRequest(f"'{key}' is required", key)
        return None
    if not isinstance(value, str):
        raise BadRequest(f"'{key}' must be a string, got {type(value).__name__}", key)
    return value


MAX_STOPS = 64
MAX_STOP_CHARS = 256


def stop_list(body: JSON, key: str = "stop") -> tuple[str, ...]:
    value = body.get(key)
    if value is None:
        return ()
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(s, str) for s in value):
        raise BadRequest(f"'{key}' must be a string or a list of strings", key)
    # Every generated token is checked against every stop string on the engine's one loop:
    # bounded here, one request cannot slow every other's tokens.
    if len(value) > MAX_STOPS:
        raise BadRequest(f"'{key}' has {len(value)} strings; at most {MAX_STOPS} are taken", key)
    if any(len(s) > MAX_STOP_CHARS for s in value):
        raise BadRequest(f"a '{key}' string is longer than {MAX_STOP_CHARS} characters", key)
    return tuple(value)


def strings(body: JSON, key: str) -> list[str]:
    value = body.get(key)
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(s, str) for s in value):
        raise BadRequest(f"'{key}' must be a list of strings", key)
    return value


def accepted(body: JSON, kinds: dict[str, str]) -> None:
    """Fields taken with no effect here must still be of their kind: "object", "string" or
    "strings"."""
    read: dict[str, Callable[[JSON, str], object]] = {
        "object": obj,
        "string": string,
        "strings": strings,
    }
    for key, kind in kinds.items():
        read[kind](body, key)


def obj(body: JSON, key: str) -> JSON:
    value = body.get(key)
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise BadRequest(f"'{key}' must be an object, got {type(value).__name__}", key)
    return value
