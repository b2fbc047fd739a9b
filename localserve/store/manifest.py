"""A manifest: what one stored model name is made of (its files, and where they came from)."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any

from localserve.store.names import ModelName, check_relative_path, parse_digest, parse_name

SCHEMA = 1


@dataclass(frozen=True)
class ManifestFile:
    """One file of a model: a blob in the store (`digest`), or a user's own file (`link`)."""

    path: str
    size: int
    digest: str | None = None  # "sha256:<hex>"
    link: str | None = None


@dataclass
class Manifest:
    name: ModelName
    format: str
    files: list[ManifestFile]
    source: str = ""
    revision: str = ""
    license: str | None = None
    context: int | None = None
    created_at: float = 0.0
    embedded: bool = False
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def size(self) -> int:
        return sum(f.size for f in self.files)

    @property
    def digest(self) -> str:
        """One digest for the model, as Ollama's list shows: its first blob's, else empty."""
        return next((f.digest for f in self.files if f.digest), "")

    def to_json(self) -> str:
        data = asdict(self)
        data["name"] = str(self.name)
        data["schema"] = SCHEMA
        data.pop("embedded")
        return json.dumps(data, indent=2)

    @classmethod
    def from_json(cls, text: str) -> Manifest:
        """Parse and check every field that later becomes a path: a manifest is not trusted."""
        data = json.loads(text)
        if not isinstance(data, dict) or data.get("schema") != SCHEMA:
            raise ValueError("not a localserve manifest")
        files = []
        for raw in data["files"]:
            digest = raw.get("digest")
            if digest is not None:
                parse_digest(digest)
            link = raw.get("link")
            if digest is None and not isinstance(link, str):
                raise ValueError("a manifest file needs a digest or a link")
            files.append(
                ManifestFile(check_relative_path(raw["path"]), int(raw["size"]), digest, link)
            )
        if not files:
            raise ValueError("a manifest lists no files")
        return cls(
            name=parse_name(data["name"]),
            format=str(data["format"]),
            files=files,
            source=str(data.get("source", "")),
            revision=str(data.get("revision", "")),
            license=data.get("license"),
            context=data.get("context"),
            created_at=float(data.get("created_at", 0.0)),
            extra=dict(data.get("extra", {})),
        )
