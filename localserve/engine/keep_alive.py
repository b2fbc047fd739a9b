"""keep_alive values as Ollama takes them: seconds, or durations like "5m", "1h30m", "-1"."""

from __future__ import annotations

import re

from localserve.engine.errors import BadRequest

DEFAULT_KEEP_ALIVE = 300.0
_PART = re.compile(r"(-?\d+(?:\.\d+)?)(ms|s|m|h)")
_SCALE = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}


def parse_keep_alive(value: object, param: str = "keep_alive") -> float | None:
    """Seconds to stay loaded after the last request; None means forever, 0 means unload now.

    Any negative value means forever, as in Ollama.
    """
    if isinstance(value, bool):
        raise BadRequest(f"'{param}' must be a duration like \"5m\" or a number of seconds", param)
    if isinstance(value, (int, float)):
        seconds = float(value)
    elif isinstance(value, str):
        text = value.strip().lower()
        try:
            seconds = float(text)
        except ValueError:
            parts = _PART.findall(text)
            if not parts or "".join(n + u for n, u in parts) != text:
                raise BadRequest(
                    f"'{param}' must be a duration like \"5m\" or a number of seconds", param
                ) from None
            seconds = sum(float(n) * _SCALE[u] for n, u in parts)
    else:
        raise BadRequest(f"'{param}' must be a duration like \"5m\" or a number of seconds", param)
    return None if seconds < 0 else seconds
