"""Units a user types: memory sizes ("512MiB", "4G") and durations as Ollama takes them for
keep_alive (seconds, or "5m", "1h30m", "-1"); and the figures we print back (sizes, parameter
counts, spans of time); and the byte widths of the floats memory estimates count in."""

from __future__ import annotations

import enum
import re
from datetime import datetime, timezone
from typing import Final

from localserve.ground.errors import BadRequest

# One part of a duration, matched only where the last one ended (never searched for: a search
# restarts at every digit of a long run, and each restart runs the digits to the end again).
_PART = re.compile(r"(-?\d+(?:\.\d+)?)(ms|s|m|h)")
_SCALE = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}
# A duration is a few characters ("1h30m"); the cap bounds what any reading of one costs.
MAX_DURATION_CHARS = 64
# Longer than this is for ever: an expiry date that far out is past what dates can hold.
_FOREVER_S = 100 * 365 * 86400.0


class Unset(enum.Enum):
    """A request that named no keep_alive: the model keeps whatever it had. Distinct from
    None (forever) and 0 (unload now), which a request may ask for."""

    UNSET = "unset"


UNSET: Final = Unset.UNSET
# Seconds to stay loaded, None for ever, or UNSET where a request left it to the model.
KeepAlive = float | None | Unset


def parse_keep_alive(value: object, param: str = "keep_alive") -> float | None:
    """Seconds to stay loaded after the last request; None means forever, 0 means unload now.

    Any negative value means forever, as in Ollama.
    """
    if isinstance(value, bool):
        raise _not_a_duration(param)
    if isinstance(value, (int, float)):
        # Clamped before it is a float: an int of 400 digits is none (OverflowError), and any
        # past either end is for ever.
        seconds = float(min(max(value, -1), 2 * _FOREVER_S))
    elif isinstance(value, str):
        text = value.strip().lower()
        if len(text) > MAX_DURATION_CHARS:
            raise _not_a_duration(param, f", of at most {MAX_DURATION_CHARS} characters")
        try:
            seconds = float(text)
        except ValueError:
            parsed = _duration(text)
            if parsed is None:
                raise _not_a_duration(param) from None
            seconds = parsed
    else:
        raise _not_a_duration(param)
    if seconds != seconds:  # NaN
        raise _not_a_duration(param)
    return None if seconds < 0 or seconds > _FOREVER_S else seconds


def _duration(text: str) -> float | None:
    """Seconds in "1h30m", "5m", "1.5s", "-5m" (parts one after another, nothing between), or
    None for a text that is no such duration."""
    seconds, pos = 0.0, 0
    while pos < len(text):
        part = _PART.match(text, pos)
        if part is None:
            break
        seconds += float(part[1]) * _SCALE[part[2]]
        pos = part.end()
    return seconds if text and pos == len(text) else None


def _not_a_duration(param: str, bound: str = "") -> BadRequest:
    return BadRequest(
        f"'{param}' must be a duration like \"5m\" or a number of seconds{bound}", param
    )


GiB = 1 << 30
# Bytes per element of the two float widths model memory is sized in.
F16 = 2
F32 = 4
_UNITS = {
    "": 1,
    "b": 1,
    "k": 1 << 10,
    "kb": 1 << 10,
    "kib": 1 << 10,
    "m": 1 << 20,
    "mb": 1 << 20,
    "mib": 1 << 20,
    "g": GiB,
    "gb": GiB,
    "gib": GiB,
    "t": 1 << 40,
    "tb": 1 << 40,
    "tib": 1 << 40,
}


# No machine holds more; a bound keeps a typo of many digits from reaching arithmetic as inf.
MAX_SIZE = 1 << 60


def parse_size(text: str) -> int:
    """'512MiB', '2G', '1.5GB', '1048576' -> bytes (binary units throughout)."""
    s = text.strip().lower().replace(" ", "")
    i = len(s)
    while i and not (s[i - 1].isdigit() or s[i - 1] == "."):
        i -= 1
    number, unit = s[:i], s[i:]
    if not number or unit not in _UNITS:
        raise ValueError(f"not a memory size: {text!r} (try 512MiB or 4GiB)")
    size = float(number) * _UNITS[unit]
    if not size <= MAX_SIZE:  # also NaN; 1e400 is inf, which int() raises OverflowError on
        raise ValueError(f"not a memory size: {text!r} (at most {MAX_SIZE} bytes)")
    return int(size)


def format_size(n: int) -> str:
    for unit, size in (("GiB", GiB), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if abs(n) >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n} B"


def parse_time(text: str | None) -> datetime | None:
    """An ISO time from the API (Ollama's `expires_at`), as an aware datetime."""
    if not text:
        return None
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    return moment if moment.tzinfo else moment.replace(tzinfo=timezone.utc)


def time_span(seconds: float) -> str:
    """A span as a person says it, to its largest unit: "4 minutes", "1 day"."""
    for unit, step in (("day", 86400), ("hour", 3600), ("minute", 60)):
        if seconds >= step:
            n = int(seconds // step)
            return f"{n} {unit}{'s' if n != 1 else ''}"
    n = int(seconds)
    return f"{n} second{'s' if n != 1 else ''}"


def parameter_size(n: int) -> str:
    """A parameter count as Ollama prints it: 135000000 -> "135M", 1236000000 -> "1.2B"."""
    for unit, size in (("B", 1e9), ("M", 1e6), ("K", 1e3)):
        if n >= size:
            return f"{n / size:.0f}{unit}" if n / size >= 10 else f"{n / size:.1f}{unit}"
    return str(n)
