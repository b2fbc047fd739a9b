"""The files of /v1/files, under the state folder's `batches/files/`: each file's bytes in
`ID.jsonl` and its record (OpenAI's file object) in `ID.json`. Uploads are batch inputs
(purpose `batch`); a batch's output and error files are adopted here when it ends (purpose
`batch_output`). Every file expires `batch_file_ttl` after it was made; at most `batch_files`
are kept, and an upload beyond that is refused (an output never is: a job's work is not lost
to a limit)."""

from __future__ import annotations

import os
import time
import uuid
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from localserve.server.batches import disk
from localserve.server.http.refused import Refused

BATCH, BATCH_OUTPUT = "batch", "batch_output"


@dataclass(frozen=True)
class StoredFile:
    id: str
    bytes: int
    created_at: int
    filename: str
    purpose: str
    expires_at: int | None

    def shape(self) -> dict[str, Any]:
        """OpenAI's file object."""
        return {
            "object": "file",
            **asdict(self),
            "status": "processed",
            "status_details": None,
        }

    def expired(self, now: float) -> bool:
        return self.expires_at is not None and now >= self.expires_at


def new_file_id() -> str:
    return f"file-{uuid.uuid4().hex[:24]}"


class FileStore:
    """The files, with an index in memory (read once at start, a file's record per file)."""

    def __init__(self, root: Path, max_files: int, ttl_s: float) -> None:
        self.root = root
        self.max_files = max_files
        self.ttl_s = ttl_s
        root.mkdir(parents=True, exist_ok=True)
        self._files: dict[str, StoredFile] = {}
        for stored in disk.read_records(root.glob("file-*.json"), StoredFile):
            if self.path(stored.id).exists():
                self._files[stored.id] = stored
        # Uploads and records that a crash left half-way are of no use to anyone.
        for partial in [*root.glob(".upload-*"), *root.glob(".*.tmp")]:
            partial.unlink(missing_ok=True)

    def path(self, file_id: str) -> Path:
        return self.root / f"{file_id}.jsonl"

    def staging(self) -> Path:
        """Where an upload is written while it arrives (renamed into place when checked)."""
        return self.root / f".upload-{uuid.uuid4().hex}"

    def room_for_one(self) -> None:
        if len(self._files) >= self.max_files:
            raise Refused(
                400,
                f"{self.max_files} files are stored, the most kept (batch_files); delete some "
                "with DELETE /v1/files/ID",
                "batch_files",
            )

    def add(self, content: Path, filename: str, purpose: str, file_id: str = "") -> StoredFile:
        """Take `content` (renamed, not copied) as a new file; its record is written after it,
        so a record always has its bytes. With a `file_id` already stored, that one is kept
        (a job's output adopted again after a crash between the two writes)."""
        file_id = file_id or new_file_id()
        if file_id in self._files:
            return self._files[file_id]
        now = int(time.time())
        expires = now + int(self.ttl_s) if self.ttl_s else None
        if content.exists() or not self.path(file_id).exists():
            os.replace(content, self.path(file_id))
        size = self.path(file_id).stat().st_size
        stored = StoredFile(file_id, size, now, filename, purpose, expires)
        disk.write_json(self.root / f"{file_id}.json", asdict(stored))
        self._files[file_id] = stored
        return stored

    def get(self, file_id: str) -> StoredFile:
        stored = self._files.get(file_id)
        if stored is None:
            raise Refused(404, f"no file with id '{file_id}'", "file_id")
        return stored

    def all(self) -> list[StoredFile]:
        return sorted(self._files.values(), key=lambda f: (f.created_at, f.id))

    def delete(self, file_id: str) -> None:
        self.get(file_id)
        # The record first: bytes without a record are never listed.
        (self.root / f"{file_id}.json").unlink(missing_ok=True)
        self.path(file_id).unlink(missing_ok=True)
        del self._files[file_id]
