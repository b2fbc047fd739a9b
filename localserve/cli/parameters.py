"""Sampling parameters by Ollama's names, for `/set parameter` and `run --parameter`."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

# Each name a user may type, and the chat request field it sets.
PARAMETERS: dict[str, tuple[str, Callable[[str], Any]]] = {
    "temperature": ("temperature", float),
    "top_p": ("top_p", float),
    "top_k": ("top_k", int),
    "min_p": ("min_p", float),
    "repeat_penalty": ("repeat_penalty", float),
    "presence_penalty": ("presence_penalty", float),
    "frequency_penalty": ("frequency_penalty", float),
    "seed": ("seed", int),
    "num_predict": ("max_tokens", int),
    "max_tokens": ("max_tokens", int),
    "stop": ("stop", str),
}


class BadParameter(ValueError):
    pass


def parse(name: str, values: Sequence[str]) -> tuple[str, Any]:
    """(request field, value) for `NAME VALUE...`; `stop` takes several values."""
    if name not in PARAMETERS:
        raise BadParameter(f"unknown parameter '{name}'; known: {', '.join(PARAMETERS)}")
    if not values:
        raise BadParameter(f"parameter '{name}' needs a value")
    field, kind = PARAMETERS[name]
    try:
        return field, ([kind(v) for v in values] if name == "stop" else kind(values[0]))
    except ValueError:
        raise BadParameter(f"'{values[0]}' is not a valid value for {name}") from None
