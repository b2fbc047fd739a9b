"""The catalog: friendly names (`llama3.2:1b`) mapped to where their files live.

The entries are data (`models/catalog.toml`, installed as `localserve.models`), so adding a
model needs no code. A user's own `catalog.toml` in the config folder, and the file named by
LOCALSERVE_CATALOG, add entries or override shipped ones.
"""

from __future__ import annotations

import difflib
import os
import sys
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from localserve.store.names import ModelName, parse_name

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

FORMATS = ("gguf", "onnx")


class CatalogError(ValueError):
    """A catalog file that cannot be used, with the file and entry named."""


@dataclass(frozen=True)
class CatalogEntry:
    name: ModelName
    source: str
    revision: str = "main"
    sha256: str | None = None
    size: int | None = None
    format: str = "gguf"
    context: int | None = None
    license: str | None = None
    description: str = ""


def _entry(key: str, raw: dict[str, Any], origin: str) -> CatalogEntry:
    where = f"{origin}: entry '{key}'"
    if not isinstance(raw, dict) or not isinstance(raw.get("source"), str):
        raise CatalogError(f"{where} needs a 'source' string")
    fmt = raw.get("format", "gguf")
    if fmt not in FORMATS:
        raise CatalogError(f"{where}: format must be one of {', '.join(FORMATS)}")
    sha = raw.get("sha256")
    if sha is not None and (not isinstance(sha, str) or len(sha) != 64):
        raise CatalogError(f"{where}: sha256 must be 64 hex digits")
    return CatalogEntry(
        name=parse_name(key),
        source=raw["source"],
        revision=str(raw.get("revision", "main")),
        sha256=sha.lower() if sha else None,
        size=int(raw["size"]) if "size" in raw else None,
        format=fmt,
        context=int(raw["context"]) if "context" in raw else None,
        license=raw.get("license"),
        description=str(raw.get("description", "")),
    )


def _parse(text: str, origin: str) -> dict[ModelName, CatalogEntry]:
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise CatalogError(f"{origin}: {exc}") from None
    entries = (_entry(key, raw, origin) for key, raw in data.items())
    return {e.name: e for e in entries}


def _user_files() -> list[Path]:
    files = []
    try:
        from platformdirs import user_config_dir

        files.append(Path(user_config_dir("localserve")) / "catalog.toml")
    except ImportError:  # the wheel-only check installs no dependencies
        pass
    extra = os.environ.get("LOCALSERVE_CATALOG")
    if extra:
        files.append(Path(extra))
    return files


class Catalog:
    def __init__(self, entries: dict[ModelName, CatalogEntry]) -> None:
        self.entries = entries

    @classmethod
    def load(cls) -> Catalog:
        """The shipped catalog, then the user's files over it."""
        shipped = resources.files("localserve.models").joinpath("catalog.toml")
        entries = _parse(shipped.read_text(encoding="utf-8"), "the shipped catalog")
        for path in _user_files():
            if path.is_file():
                entries.update(_parse(path.read_text(encoding="utf-8"), str(path)))
        return cls(entries)

    def get(self, name: ModelName) -> CatalogEntry | None:
        return self.entries.get(name)

    def suggest(self, text: str, also: list[str] | None = None, n: int = 3) -> list[str]:
        """The names nearest to what a user typed, for "did you mean" messages."""
        known = sorted({e.name.short for e in self.entries.values()} | set(also or []))
        typed = text.lower()
        close = difflib.get_close_matches(typed, known, n=n, cutoff=0.5)
        base = typed.partition(":")[0]
        same_family = [k for k in known if k.partition(":")[0] == base and k not in close]
        return (close + same_family)[:n]
