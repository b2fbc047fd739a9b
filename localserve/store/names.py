"""The strict grammar of model names, and the one check every store path goes through.

A name is `name[:tag]`: lowercase letters, digits, `.`, `_` and `-`, starting with a letter or
digit. Nothing that could walk out of the store (`..`, separators, absolute paths, NUL) is a
name, and a digest is exactly `sha256:` and 64 hex digits. Ollama's CVE-2024-37032 came from
trusting a digest read from a manifest; every path here is built from checked parts only and
then proved to lie inside the store.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from localserve.ground.errors import BadRequest

DEFAULT_TAG = "latest"
_PART = re.compile(r"[a-z0-9][a-z0-9._-]{0,79}")
_DIGEST = re.compile(r"sha256:([0-9a-f]{64})")


class BadName(BadRequest):
    """A name, tag, digest or reference that the grammar refuses."""

    def __init__(self, message: str) -> None:
        super().__init__(message, "model")


@dataclass(frozen=True, order=True)
class ModelName:
    name: str
    tag: str = DEFAULT_TAG

    def __str__(self) -> str:
        return f"{self.name}:{self.tag}"

    @property
    def short(self) -> str:
        """How a user writes it: `smollm2`, not `smollm2:latest`."""
        return self.name if self.tag == DEFAULT_TAG else str(self)


def _check_part(part: str, what: str, original: str) -> str:
    if not _PART.fullmatch(part) or ".." in part:
        raise BadName(
            f"invalid model {what} in '{_printable(original)}': use lowercase letters, digits, "
            "'.', '_' and '-' (at most 80), starting with a letter or digit"
        )
    return part


def _printable(text: str) -> str:
    return text.encode("unicode_escape").decode("ascii")[:120]


def parse_name(text: str) -> ModelName:
    """`Llama3.2:1B` is `llama3.2:1b`; no tag means `latest`. Raises BadName."""
    if not isinstance(text, str) or not text:
        raise BadName("a model name is required")
    name, sep, tag = text.strip().lower().partition(":")
    if sep and not tag:
        raise BadName(f"invalid model name '{_printable(text)}': the tag after ':' is empty")
    return ModelName(_check_part(name, "name", text), _check_part(tag or DEFAULT_TAG, "tag", text))


def is_name(text: str) -> bool:
    try:
        parse_name(text)
    except BadName:
        return False
    return True


def slugify(text: str) -> str:
    """A name the grammar accepts, from a file or repo name (`Llama-3.2-1B` -> `llama-3.2-1b`)."""
    slug = re.sub(r"[^a-z0-9._-]+", "-", text.lower()).strip("-._")
    return re.sub(r"\.{2,}", ".", slug)[:80] or "model"


def parse_digest(text: str) -> str:
    """The 64 hex digits of a `sha256:...` digest; anything else is refused."""
    m = _DIGEST.fullmatch(text) if isinstance(text, str) else None
    if m is None:
        raise BadName(f"invalid blob digest '{_printable(str(text))}'")
    return m.group(1)


def check_relative_path(text: str) -> str:
    """A file path inside a model folder (ONNX models are folders): no escape, no absolutes."""
    if (
        not isinstance(text, str)
        or not text
        or "\0" in text
        or "\\" in text
        or text.startswith("/")
        or re.match(r"^[A-Za-z]:", text)
        or any(part in ("", ".", "..") for part in text.split("/"))
    ):
        raise BadName(f"invalid file path '{_printable(str(text))}' in a model")
    return text


def inside(root: Path, path: Path) -> Path:
    """`path`, once proved to lie under `root` (after resolving any links in both)."""
    resolved = path.resolve()
    if not resolved.is_relative_to(root.resolve()):
        raise BadName(f"refusing a path outside the model store: {path}")
    return path
