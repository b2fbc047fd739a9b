"""The sha256 of model files the store does not own (the embedded model, imported links), as
Ollama's `/api/tags` shows a digest for every model: hashed once, then kept in a small JSON file
in the store, keyed by path, size and modification time, so a changed file is hashed again.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
from pathlib import Path

CHUNK = 1 << 20
_lock = threading.Lock()


def _key(path: Path) -> str:
    stat = path.stat()
    return f"{path.resolve()}|{stat.st_size}|{stat.st_mtime_ns}"


def _hash(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(CHUNK):
            digest.update(chunk)
    return f"sha256:{digest.hexdigest()}"


def file_digest(path: Path | str, cache: Path) -> str:
    """'sha256:<hex>' of the file at `path`; the cache file keeps it for the next ask."""
    path = Path(path)
    key = _key(path)
    with _lock:
        try:
            known = json.loads(cache.read_text("utf-8"))
        except (OSError, ValueError):
            known = {}
        if not isinstance(known, dict):
            known = {}
        if isinstance(known.get(key), str):
            return known[key]
        digest = _hash(path)
        known[key] = digest
        try:
            cache.parent.mkdir(parents=True, exist_ok=True)
            tmp = cache.with_suffix(".tmp")
            tmp.write_text(json.dumps(known, indent=1), "utf-8")
            os.replace(tmp, cache)
        except OSError:
            pass  # a read-only store still answers; it hashes again next time
        return digest
