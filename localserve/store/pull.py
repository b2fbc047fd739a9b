"""Pulling a model: a name or reference becomes verified files and, last, a manifest.

Progress goes to a callback as Ollama's /api/pull objects (`pulling manifest`, `pulling
<digest>` with total and completed, `verifying sha256 digest`, `writing manifest`, `success`),
so the HTTP face streams them as they are and the CLI draws its bar from them.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from localserve.formats import BadModelFile, facts, format_named
from localserve.ground.errors import ModelNotFound
from localserve.store.catalog import Catalog, CatalogEntry
from localserve.store.download import fetch_blob
from localserve.store.hub import (
    HubRef,
    PullError,
    RemoteFile,
    file_url,
    list_files,
    looks_like_ref,
    parse_ref,
    pick_files,
)
from localserve.store.manifest import Manifest, ManifestFile
from localserve.store.model_store import ModelStore
from localserve.store.names import ModelName, parse_name, slugify

Report = Callable[[dict[str, Any]], None]

# One download of a blob at a time in this process; a second pull of it waits, then finds it.
_blob_locks: dict[str, threading.Lock] = {}
_blob_locks_guard = threading.Lock()


def _blob_lock(key: str) -> threading.Lock:
    with _blob_locks_guard:
        return _blob_locks.setdefault(key, threading.Lock())


@dataclass(frozen=True)
class PullPlan:
    """What a pull will fetch and under which name it will be stored."""

    name: ModelName
    ref: HubRef
    format: str
    entry: CatalogEntry | None = None


def plan_pull(text: str, catalog: Catalog) -> PullPlan:
    """A catalog name, `hf://org/repo/file.gguf`, `hf://org/repo/folder` or `org/repo:QUANT`."""
    if looks_like_ref(text):
        ref = parse_ref(text)
        if ref.quant:
            name = ModelName(slugify(re.sub(r"(?i)-gguf$", "", ref.repo)), slugify(ref.quant))
        elif ref.is_file:
            name = ModelName(slugify(ref.path.rsplit("/", 1)[-1][: -len(".gguf")]))
        else:
            name = ModelName(slugify(ref.path.rsplit("/", 1)[-1] if ref.path else ref.repo))
        return PullPlan(name, ref, "gguf" if ref.is_file or ref.quant else "onnx")
    name = parse_name(text)
    entry = catalog.get(name)
    if entry is None:
        close = catalog.suggest(text)
        hint = f"did you mean {', '.join(close)}?" if close else "see the catalog for names"
        raise ModelNotFound(text, f"it is not in the catalog; {hint}")
    return PullPlan(name, parse_ref(entry.source, entry.revision), entry.format, entry)


def _remote_files(plan: PullPlan) -> list[RemoteFile]:
    entry = plan.entry
    if entry is not None and plan.ref.is_file and entry.sha256 and entry.size:
        # The catalog already knows the file: no listing needed (mirrors without the API work).
        return [RemoteFile(plan.ref.path, entry.size, entry.sha256)]
    files = pick_files(plan.ref, list_files(plan.ref))
    if entry is not None and entry.sha256 and len(files) == 1:
        files = [RemoteFile(files[0].path, files[0].size, entry.sha256)]
    return files


def pull(store: ModelStore, catalog: Catalog, text: str, report: Report) -> Manifest:
    """Download, verify and register a model; blocking (run it on a worker thread)."""
    plan = plan_pull(text, catalog)
    report({"status": "pulling manifest"})
    remote = _remote_files(plan)
    marker = format_named(plan.format).marker
    if marker and not any(f.path.endswith(marker) for f in remote):
        raise PullError(f"{plan.ref} is not a model folder: it has no {marker}", 404)
    folder_prefix = f"{plan.ref.path}/" if marker and plan.ref.path else ""
    files: list[ManifestFile] = []
    for rf in remote:
        label = (
            f"pulling {rf.sha256[:12]}" if rf.sha256 else f"pulling {rf.path.rsplit('/', 1)[-1]}"
        )
        digest_hint = f"sha256:{rf.sha256}" if rf.sha256 else None

        def progress(
            done: int, total: int | None, label: str = label, digest: str | None = digest_hint
        ) -> None:
            report(
                {"status": label, "digest": digest or "", "total": total or 0, "completed": done}
            )

        with _blob_lock(rf.sha256 or file_url(plan.ref, rf.path)):
            digest = fetch_blob(store, file_url(plan.ref, rf.path), rf.sha256, rf.size, progress)
        size = store.blob_path(digest).stat().st_size
        files.append(ManifestFile(rf.path[len(folder_prefix) :], size, digest))
    report({"status": "verifying sha256 digest"})
    manifest = Manifest(
        name=plan.name,
        format=plan.format,
        files=files,
        source=str(plan.ref),
        revision=plan.ref.revision,
        license=plan.entry.license if plan.entry else None,
        context=plan.entry.context if plan.entry else None,
        created_at=time.time(),
    )
    manifest.extra["facts"] = _inspect_or_discard(store, manifest)
    report({"status": "writing manifest"})
    store.write(manifest)
    report({"status": "success"})
    return manifest


def _inspect_or_discard(store: ModelStore, manifest: Manifest) -> dict[str, Any]:
    """A file that verifies but is not a usable model is refused, and its unshared blobs go.

    What inspection learns is kept in the manifest, so that `list` never opens a model file.
    """
    try:
        return facts(store.model_path(manifest), manifest.format).as_dict()
    except BadModelFile as exc:
        store.drop_folder(manifest.name)
        store.drop_unreferenced({f.digest for f in manifest.files if f.digest})
        raise PullError(f"refusing {manifest.source}: {exc}", 422) from None
