"""How a folder is known for the model store: its marker and its layout (store/model_store.py
writes both), so that `service uninstall --purge` deletes a folder only once it has proved the
folder is a store and nothing else: `models_dir` may name a folder the user keeps other files
in (`~/models`, the home folder itself), or another server's store (Ollama's has blobs/ and
manifests/ too).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

MARKER = ".localserve-store"
MARKER_TEXT = (
    "This folder is a localserve model store: blobs/, manifests/, partial/ and folders/.\n"
    "`localserve service uninstall --purge` deletes it only while it holds nothing else.\n"
)
FOLDERS = ("blobs", "manifests", "partial", "folders")
# Everything the store writes in its root: its folders, the digests of linked files
# (store/file_digests.py) and the file those are written through, and the marker.
ENTRIES = frozenset({*FOLDERS, "digests.json", "digests.tmp", MARKER})

_BLOB = re.compile(r"sha256-[0-9a-f]{64}")
_PARTIAL = re.compile(r"(sha256|url)-[0-9a-f]{64}\.partial")
_MANIFEST = re.compile(r"[^/]+\.json|\.tmp-[^/]*")  # a tag's manifest, or one being written


def why_not_a_store(root: Path) -> str | None:
    """None when `root` is a store and holds nothing else; else why it is not proved one.

    A store holds only the store's own entries, and either its marker or, for a store made
    before the marker, exactly the layout: blobs named by their sha256, manifests/<name>/
    <tag>.json, downloads in partial/, model folders in folders/.
    """
    if root.is_symlink():
        return "it is a link, not the store's own folder"
    if not root.is_dir():
        return "it is not a folder"
    names = {entry.name for entry in root.iterdir()}
    foreign = sorted(names - ENTRIES)
    if foreign:
        return f"it holds {foreign[0]!r}, which the model store never writes"
    if MARKER in names:
        return None
    if not names & {"blobs", "manifests", "digests.json"}:
        return "it has neither the store's marker nor its blobs, manifests or digests"
    return _layout_problem(root)


def _layout_problem(root: Path) -> str | None:
    for name in FOLDERS:
        if (root / name).exists() and not _real_dir(root / name):
            return f"its {name} is not a folder"
    checks = (
        ("blobs", lambda p: p.is_file() and bool(_BLOB.fullmatch(p.name))),
        ("partial", lambda p: p.is_file() and bool(_PARTIAL.fullmatch(p.name))),
        ("manifests", _is_manifest_folder),
        ("folders", _real_dir),
    )
    for name, fits in checks:
        folder = root / name
        odd = next((p for p in _entries(folder) if p.is_symlink() or not fits(p)), None)
        if odd is not None:
            return f"{name}/{odd.name} is not laid out as the store lays it out"
    if (root / "digests.json").exists() and not _is_digests(root / "digests.json"):
        return "its digests.json is not the store's"
    return None


def _entries(folder: Path) -> list[Path]:
    return sorted(folder.iterdir()) if folder.is_dir() else []


def _real_dir(path: Path) -> bool:
    return path.is_dir() and not path.is_symlink()


def _is_manifest_folder(path: Path) -> bool:
    return _real_dir(path) and all(
        p.is_file() and not p.is_symlink() and bool(_MANIFEST.fullmatch(p.name))
        for p in path.iterdir()
    )


def _is_digests(path: Path) -> bool:
    try:
        known = json.loads(path.read_text("utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(known, dict) and all(
        isinstance(v, str) and v.startswith("sha256:") for v in known.values()
    )
