"""Bringing models a user already has into the store: import one, or scan a folder of them.

An import is linked by default, as LM Studio does: the manifest points at the user's file and
nothing is copied (and `rm` never deletes it). With `copy`, the bytes are hashed into a blob
like a pull's. Either way the file is inspected first, so a broken one is never registered.
"""

from __future__ import annotations

import hashlib
import os
import time
from dataclasses import dataclass
from pathlib import Path

from localserve.formats import BadModelFile, detect, facts, file_format, folder_format
from localserve.ground.model import ModelFacts
from localserve.store.manifest import Manifest, ManifestFile
from localserve.store.model_store import ModelStore
from localserve.store.names import ModelName, parse_name, slugify

CHUNK = 8 << 20


def _copy_in(store: ModelStore, source: Path) -> str:
    hasher = hashlib.sha256()
    partial = store.partial_path("sha256:" + hashlib.sha256(str(source).encode()).hexdigest(), True)
    with open(source, "rb") as src, open(partial, "wb") as out:
        while block := src.read(CHUNK):
            hasher.update(block)
            out.write(block)
        out.flush()
        os.fsync(out.fileno())
    digest = f"sha256:{hasher.hexdigest()}"
    os.replace(partial, store.blob_path(digest))
    return digest


def _entry(store: ModelStore, path: Path, relative: str, copy: bool) -> ManifestFile:
    size = path.stat().st_size
    if copy:
        return ManifestFile(relative, size, digest=_copy_in(store, path))
    return ManifestFile(relative, size, link=str(path.resolve()))


def import_model(
    store: ModelStore, source: Path | str, name: str | None = None, copy: bool = False
) -> Manifest:
    """Register a GGUF file or an ONNX model folder under `name` (default: from its file name)."""
    path = Path(source).expanduser()
    fmt = detect(path)
    if fmt is None:
        raise BadModelFile(f"{path} is neither a GGUF file nor an ONNX model folder")
    if fmt.is_folder:
        files = sorted(p for p in path.rglob("*") if p.is_file() and not p.name.startswith("."))
        relative = [p.relative_to(path).as_posix() for p in files]
    else:
        files, relative = [path], [path.name]
    described = facts(path, fmt.name)  # refuses a broken model before anything is written
    model_name = parse_name(name) if name else ModelName(slugify(fmt.served_name(path)))
    store.ensure()
    previous = store.read(model_name)
    manifest = Manifest(
        name=model_name,
        format=fmt.name,
        files=[_entry(store, p, r, copy) for p, r in zip(files, relative)],
        source=str(path.resolve()),
        created_at=time.time(),
        extra={"facts": described.as_dict()},
    )
    store.write(manifest)
    if previous is not None:  # an import over an existing name replaces it
        store.drop_folder(model_name)
        store.drop_unreferenced({f.digest for f in previous.files if f.digest})
    return manifest


@dataclass(frozen=True)
class Found:
    path: Path
    facts: ModelFacts | None
    problem: str | None
    size: int


def scan(folder: Path | str) -> list[Found]:
    """Every GGUF file and ONNX model folder under `folder` (an LM Studio or llama.cpp cache)."""
    root = Path(folder).expanduser()
    found: list[Found] = []
    for dirpath, dirnames, filenames in os.walk(root):
        here = Path(dirpath)
        folder_fmt = folder_format(filenames)
        if folder_fmt is not None:
            dirnames.clear()  # a model folder's own subfolders are part of it
            size = sum((here / f).stat().st_size for f in filenames)
            found.append(_examine(here, folder_fmt.name, size))
            continue
        for filename in sorted(filenames):
            if (file_fmt := file_format(filename)) is not None:
                path = here / filename
                found.append(_examine(path, file_fmt.name, path.stat().st_size))
    return sorted(found, key=lambda f: str(f.path))


def _examine(path: Path, fmt: str, size: int) -> Found:
    try:
        return Found(path, facts(path, fmt), None, size)
    except BadModelFile as exc:
        return Found(path, None, str(exc), size)
