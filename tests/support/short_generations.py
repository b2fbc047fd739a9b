"""Fuzzed bodies that still run in a test's time (tests/live/test_openapi.py and
tests/live/test_fuzz_faces.py): every generation stops within CAP tokens, in each face's own
field, and no request unloads the model, since the first structured answer after each load
takes ~10 s on 2 cores. What a field holds that is of the wrong type is left for the handler to
refuse."""

from __future__ import annotations

from typing import Any

from localserve.ground.errors import BadRequest
from localserve.ground.units import UNSET, parse_keep_alive

CAP = 4  # tokens a fuzzed request may generate


def keep_short(path: str, body: dict[str, Any]) -> None:
    """Steer `body`, sent to `path`, in place."""
    if _unloads(body.get("keep_alive")):
        body["keep_alive"] = "5m"
    if path in ("/v1/responses", "/v1/responses/compact"):
        _clamp(body, "max_output_tokens", 1)
    elif path in ("/v1/chat/completions", "/v1/completions", "/v1/messages"):
        _clamp(body, "max_tokens", 1)
        if body.get("max_completion_tokens") is not None:
            _clamp(body, "max_completion_tokens", 1)
    elif path == "/infill":
        _clamp(body, "n_predict", 0)
    elif path in ("/api/generate", "/api/chat"):
        if body.get("options") is None:
            body["options"] = {}
        if isinstance(body["options"], dict):
            _clamp(body["options"], "num_predict", 1)


def _unloads(keep_alive: object) -> bool:
    """Whether the model could be unloaded while the test runs: kept less than 5 minutes."""
    try:
        seconds = UNSET if keep_alive is None else parse_keep_alive(keep_alive)
    except BadRequest:
        return False
    return isinstance(seconds, float) and seconds < 300


def _clamp(body: dict[str, Any], key: str, lowest: int) -> None:
    """A token count that is missing, unbounded (below `lowest`) or above CAP becomes CAP."""
    value = body.get(key)
    if value is None or (
        isinstance(value, (int, float))
        and not isinstance(value, bool)
        and (value < lowest or value > CAP)
    ):
        body[key] = CAP
