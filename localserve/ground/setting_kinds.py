"""The kinds of value a setting takes (ground/settings.py): how a user's text becomes the value
(a whole number, a size like "4GiB", a duration like "5m", a list of folders), the value text
again for the README and `--help`, and the noun an error names."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from localserve.ground.errors import BadRequest
from localserve.ground.units import format_size, parse_keep_alive, parse_size

T = TypeVar("T")


@dataclass(frozen=True)
class Kind:
    """How a setting's text becomes its value, and its value text again."""

    parse: Callable[[Any], Any]
    show: Callable[[Any], str]
    noun: str


# Counts reach llama.cpp as C ints (slots, threads, tokens), and seconds reach the event
# loop's timers: past these bounds a value is a typo, and would fail far from its flag.
MAX_WHOLE = (1 << 31) - 1
MAX_SECONDS = 1e9


def _whole(raw: Any) -> int:
    if isinstance(raw, bool) or (isinstance(raw, float) and not raw.is_integer()):
        raise ValueError
    value = int(raw)
    if not 0 <= value <= MAX_WHOLE:
        raise ValueError
    return value


def _port(raw: Any) -> int:
    value = _whole(raw)
    if not 0 < value < 65536:
        raise ValueError
    return value


def _seconds(raw: Any) -> float:
    if isinstance(raw, bool):
        raise ValueError
    value = float(raw)
    if not 0 <= value <= MAX_SECONDS:  # also NaN and inf
        raise ValueError
    return value


def _fraction(raw: Any) -> float:
    value = _seconds(raw)
    if value > 1:
        raise ValueError
    return value


def _duration(raw: Any) -> float | None:
    try:
        return parse_keep_alive(raw)
    except BadRequest:
        raise ValueError from None


def _size(raw: Any) -> int | None:
    if isinstance(raw, bool):
        raise ValueError
    return parse_size(str(raw))


def _budgets(raw: Any) -> dict[str, int]:
    """ "12GiB" (the CPU's) or "cpu=12GiB,gpu0=7GiB": a budget per memory pool."""
    if isinstance(raw, bool):
        raise ValueError
    if isinstance(raw, (int, float)):
        return {"cpu": parse_size(str(raw))}
    budgets: dict[str, int] = {}
    for part in str(raw).split(","):
        device, sep, size = part.strip().rpartition("=")
        device = device.strip().lower() if sep else "cpu"
        value = parse_size(size.strip())
        if not device or value is None or device in budgets:
            raise ValueError
        budgets[device] = value
    return budgets


def _show_budgets(value: dict[str, int]) -> str:
    return ",".join(f"{device}={_show_size(size)}" for device, size in value.items())


def _pairs(raw: Any, bare: str | None) -> list[tuple[str, Any]]:
    """ "a=1,b=2" or a TOML table {a = 1, b = 2}: (model name, value) pairs; a value without
    a name is `bare`'s, where the kind has one."""
    if isinstance(raw, dict):
        return [(str(name).strip().lower(), value) for name, value in raw.items()]
    if not isinstance(raw, str):
        raise ValueError
    pairs = []
    for part in raw.split(","):
        name, sep, value = part.strip().rpartition("=")
        if not sep and bare is None:
            raise ValueError
        pairs.append((name.strip().lower() if sep else str(bare), value.strip()))
    return pairs


def _caps(raw: Any) -> dict[str, int]:
    """ "1024" (every model's), "1024,gemma3=256", or a TOML table {"*" = 1024, gemma3 = 256}:
    a cap per model name, "*" for the rest."""
    if isinstance(raw, (int, float)) and not isinstance(raw, bool):
        parts = [("*", raw)]
    else:
        parts = _pairs(raw, "*")
    caps: dict[str, int] = {}
    for name, value in parts:
        cap = _whole(value)
        if not name or name in caps or cap == 0:
            raise ValueError
        caps[name] = cap
    return caps


def _model_pairs(raw: Any) -> dict[str, str]:
    """ "qwen3=qwen3-small,gemma3=gemma3" or a TOML table: a model named for each name (its
    draft model, or the model an alias stands for)."""
    pairs: dict[str, str] = {}
    for name, value in _pairs(raw, None):
        model = str(value).strip()
        if not name or not model or name in pairs:
            raise ValueError
        pairs[name] = model
    return pairs


def _show_pairs(value: dict[str, str]) -> str:
    return ",".join(f"{name}={model}" for name, model in value.items())


def per_model_choice(choices: dict[str, str]) -> Callable[[Any], dict[str, str]]:
    """A parser of "q8_0" (every model's) or "q8_0,gemma3=q4_0" (or a TOML table): one of
    `choices` per model name, "*" for the rest; `choices` maps what a user may type (Ollama's
    "1" too) to the value kept."""

    def parse(raw: Any) -> dict[str, str]:
        raw = str(raw).lower() if isinstance(raw, (bool, int)) else raw
        chosen: dict[str, str] = {}
        for name, value in _pairs(raw, "*"):
            typed = str(value).strip().lower()
            if not name or name in chosen or typed not in choices:
                raise ValueError
            chosen[name] = choices[typed]
        return chosen

    return parse


def for_model(per_model: dict[str, T] | None, model: str) -> T | None:
    """A per-model setting's value for `model` (by its name): its own, else "*"'s, else None."""
    chosen = per_model or {}
    return chosen.get(model.lower(), chosen.get("*"))


def _show_caps(value: dict[str, Any]) -> str:
    return ",".join(str(cap) if name == "*" else f"{name}={cap}" for name, cap in value.items())


def _layers(raw: Any) -> int | None:
    """ "auto" (None: as many as fit) or a layer count."""
    if isinstance(raw, str) and raw.strip().lower() in ("auto", "-1"):
        return None
    if isinstance(raw, int) and raw == -1:
        return None
    return _whole(raw)


def _names(raw: Any) -> tuple[str, ...]:
    """ "a, b" or a TOML list: names, origins or folders."""
    if isinstance(raw, (list, tuple)):
        items = [str(item) for item in raw]
    elif isinstance(raw, str):
        items = raw.split(",")
    else:
        raise ValueError
    return tuple(item.strip() for item in items if item.strip())


def _switch(raw: Any) -> bool:
    if isinstance(raw, bool):
        return raw
    text = str(raw).strip().lower()
    if text in ("1", "true", "yes", "on"):
        return True
    if text in ("0", "false", "no", "off", ""):
        return False
    raise ValueError


def _show_duration(value: float | None) -> str:
    if value is None:
        return "-1"
    for unit, scale in (("h", 3600), ("m", 60)):
        if value >= scale and value % scale == 0:
            return f"{value / scale:g}{unit}"
    return f"{value:g}s"


def _show_size(value: int) -> str:
    return format_size(value).replace(".0 ", "").replace(" ", "")


TEXT = Kind(str, str, "text")
PATH = Kind(lambda raw: str(Path(str(raw)).expanduser()), str, "a folder")
WHOLE = Kind(_whole, str, f"a whole number up to {MAX_WHOLE}")
PORT = Kind(_port, str, "a port between 1 and 65535")
SECONDS = Kind(_seconds, lambda v: f"{v:g}", f"a number of seconds up to {MAX_SECONDS:g}")
NUMBER = Kind(_seconds, lambda v: f"{v:g}", "a number, 0 or more")
FRACTION = Kind(_fraction, lambda v: f"{v:g}", "a fraction from 0 to 1")
DURATION = Kind(_duration, _show_duration, 'a duration like "5m", 0 or -1')
KV_TYPES = Kind(
    per_model_choice({t: t for t in ("f16", "q8_0", "q4_0")}),
    _show_caps,
    "f16, q8_0 or q4_0, or per model as q8_0,gemma3=q4_0",
)
FLASH = Kind(
    per_model_choice(
        {"auto": "auto", "on": "on", "1": "on", "true": "on", "off": "off", "0": "off"}
    ),
    _show_caps,
    "auto, on or off, or per model as auto,gemma3=on",
)
SIZE = Kind(_size, _show_size, "a size like 512MiB or 4GiB")
BUDGETS = Kind(
    _budgets, _show_budgets, 'a size like 12GiB, or sizes per device like "cpu=12GiB,gpu0=7GiB"'
)
CAPS = Kind(
    _caps, _show_caps, 'a token count like 1024, or counts per model like "1024,gemma3=256"'
)
DRAFTS = Kind(_model_pairs, _show_pairs, 'model=draft pairs like "qwen3=qwen3-small"')
ALIASES = Kind(_model_pairs, _show_pairs, 'alias=model pairs like "claude-sonnet-4-5=gemma3"')
LAYERS = Kind(_layers, str, 'a layer count, or "auto"')
NAMES_LIST = Kind(_names, ",".join, "a comma-separated list")
PATHS = Kind(
    lambda raw: tuple(str(Path(p).expanduser()) for p in _names(raw)),
    ",".join,
    "a comma-separated list of folders",
)
SECRET = Kind(str, lambda _: "(set)", "text")
# A switch: `--no-auth` on the command line, true/false in the environment and config.
SWITCH = Kind(_switch, lambda v: "on" if v else "off", "true or false")


def _log_format(raw: Any) -> str:
    text = str(raw).strip().lower()
    if text not in ("text", "json"):
        raise ValueError
    return text


LOG_FORMAT = Kind(_log_format, str, '"text" or "json"')
