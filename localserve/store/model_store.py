"""The store on disk: content-addressed blobs, one manifest per model name, and nothing else.

    <root>/blobs/sha256-<hex>            the bytes, named by their sha256
    <root>/manifests/<name>/<tag>.json   which blobs (or linked files) make up a model
    <root>/partial/                      downloads in progress (resumable; never listed)
    <root>/folders/<name>/<tag>/         an ONNX model's files, hard-linked into the layout
                                         onnxruntime-genai expects
    <root>/.localserve-store             says the folder is a store (ground/store_layout.py:
                                         `service uninstall --purge` deletes only a store)

A model exists when its manifest does: manifests are written last, atomically, after every blob
is verified, so an interrupted pull never shows in `list`. Deleting removes the manifest first,
then only the blobs no other manifest references.
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
from pathlib import Path

from localserve.formats import BadModelFile, format_named
from localserve.ground.places import default_models_dir
from localserve.ground.store_layout import MARKER, MARKER_TEXT
from localserve.store.manifest import Manifest, ManifestFile
from localserve.store.names import BadName, ModelName, inside, parse_digest

log = logging.getLogger(__name__)


def default_root() -> Path:
    env = os.environ.get("LOCALSERVE_MODELS")
    if env:
        return Path(env).expanduser()
    return default_models_dir()


def atomic_write(path: Path, text: str) -> None:
    """Readers see the old file or the new one, never half of one. No fsync: with ordered
    journalling it would also flush the blob just renamed (about 0.3 s for 250 MB here), and a
    manifest lost to a power cut only means pulling again."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


class ModelStore:
    def __init__(self, root: Path | str | None = None) -> None:
        self.root = Path(root).expanduser() if root else default_root()
        self.blobs = self.root / "blobs"
        self.manifests = self.root / "manifests"
        self.partial = self.root / "partial"
        self.folders = self.root / "folders"

    def ensure(self) -> None:
        for folder in (self.blobs, self.manifests, self.partial, self.folders):
            folder.mkdir(parents=True, exist_ok=True)
        self.mark()

    def mark(self) -> None:
        """Leave the marker that proves this folder a store, before the store writes in it."""
        marker = self.root / MARKER
        if not marker.exists():
            atomic_write(marker, MARKER_TEXT)

    # -- paths, each built from checked parts and proved to stay inside the store -------------

    def blob_path(self, digest: str) -> Path:
        return inside(self.root, self.blobs / f"sha256-{parse_digest(digest)}")

    def partial_path(self, digest: str, unverified: bool = False) -> Path:
        """Where a download in progress lives. An unverified one (no sha256 known beforehand)
        is keyed by the sha256 of its URL instead, so that it too can resume."""
        kind = "url" if unverified else "sha256"
        return inside(self.root, self.partial / f"{kind}-{parse_digest(digest)}.partial")

    def manifest_path(self, name: ModelName) -> Path:
        return inside(self.root, self.manifests / name.name / f"{name.tag}.json")

    def folder_path(self, name: ModelName) -> Path:
        return inside(self.root, self.folders / name.name / name.tag)

    # -- manifests -----------------------------------------------------------------------------

    def read(self, name: ModelName) -> Manifest | None:
        path = self.manifest_path(name)
        try:
            return Manifest.from_json(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return None
        except (ValueError, KeyError, TypeError, BadName) as exc:
            log.warning("ignoring the unreadable manifest %s: %s", path, exc)
            return None

    def write(self, manifest: Manifest) -> None:
        atomic_write(self.manifest_path(manifest.name), manifest.to_json())

    def manifests_on_disk(self) -> list[Manifest]:
        """Every readable manifest; reads manifests only, never a blob."""
        found: list[Manifest] = []
        if not self.manifests.is_dir():
            return found
        for path in sorted(self.manifests.glob("*/*.json")):
            try:
                found.append(Manifest.from_json(path.read_text(encoding="utf-8")))
            except (OSError, ValueError, KeyError, TypeError, BadName) as exc:
                log.warning("ignoring the unreadable manifest %s: %s", path, exc)
        return found

    def has_blob(self, digest: str, size: int | None = None) -> bool:
        path = self.blob_path(digest)
        return path.is_file() and (size is None or path.stat().st_size == size)

    # -- where a model's runtime reads it ------------------------------------------------------

    def check_files(self, manifest: Manifest) -> None:
        """Every file is there at its recorded size: a moved link or a blob cut short by a power
        cut (blobs are renamed into place without an fsync) is named, never loaded."""
        for entry in manifest.files:
            path = self.file_of(entry)
            try:
                size = path.stat().st_size
            except OSError:
                size = -1
            if size != entry.size:
                raise BadModelFile(
                    f"model '{manifest.name.short}' is damaged: "
                    f"{path} should hold {entry.size} bytes "
                    f"but {'is missing' if size < 0 else f'holds {size}'}; pull or import it again"
                )

    def file_of(self, entry: ManifestFile) -> Path:
        return Path(entry.link) if entry.link else self.blob_path(entry.digest or "")

    def model_path(self, manifest: Manifest) -> Path:
        """A one-file model (GGUF) is its file; a folder model (ONNX) is a folder laid out as the
        hub had it."""
        if not format_named(manifest.format).is_folder:
            return self.file_of(manifest.files[0])
        folder = self.folder_path(manifest.name)
        for entry in manifest.files:
            target = inside(folder, folder / entry.path)
            source = self.file_of(entry)
            if target.exists() and target.stat().st_size == entry.size:
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            target.unlink(missing_ok=True)
            try:
                os.link(source, target)  # same bytes, no copy
            except OSError:
                shutil.copyfile(source, target)
        return folder

    # -- deleting ------------------------------------------------------------------------------

    def delete(self, name: ModelName) -> int:
        """Remove a model; returns the bytes freed. Linked files are the user's: never touched."""
        manifest = self.read(name)
        path = self.manifest_path(name)
        if not path.is_file():
            return 0
        path.unlink()
        try:
            path.parent.rmdir()
        except OSError:
            pass  # other tags of the name remain
        self.drop_folder(name)
        digests = {f.digest for f in manifest.files if f.digest} if manifest else set()
        return self.drop_unreferenced(digests)

    def drop_folder(self, name: ModelName) -> None:
        shutil.rmtree(self.folder_path(name), ignore_errors=True)

    def drop_unreferenced(self, digests: set[str]) -> int:
        """Delete those of `digests` that no manifest references; returns the bytes freed.

        Only the named blobs are candidates: a concurrent pull's fresh blobs, not yet in a
        manifest, are never swept away.
        """
        referenced = {f.digest for m in self.manifests_on_disk() for f in m.files if f.digest}
        freed = 0
        for digest in digests - referenced:
            blob = self.blob_path(digest)
            if blob.is_file():
                freed += blob.stat().st_size
                blob.unlink()
        return freed
