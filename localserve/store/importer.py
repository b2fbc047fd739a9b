"""Bringing models a user already has into the store: import one, or scan a folder of them.

An import is linked by default, as LM Studio does: the manifest points at the user's file and
nothing is copied (and `rm` never deletes it). With `copy`, the bytes are hashed into a blob
like a pull's. Either way the file is inspected first, so a broken one is never registered.

A client other than the operator may read only within its `roots` (the models folder and
`import_roots`). Every path is resolved once, links and all, and proved inside them, a model
folder's every member too (a link in an allowed folder may point anywhere); from then on only
the resolved paths are read, so a link swapped in after the check is never followed.
"""

from __future__ import annotations

import hashlib
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from localserve.formats import BadModelFile, detect, facts, file_format, folder_format
from localserve.ground.model import ModelFacts
from localserve.store.manifest import Manifest, ManifestFile
from localserve.store.model_store import ModelStore
from localserve.store.names import ModelName, parse_name, slugify

CHUNK = 8 << 20
# The folders a client may read, resolved; None: any folder (the operator, this user's CLI).
Roots = Sequence[Path] | None
_ROOTS = (
    "the folders import and scan may read (the models folder and import_roots: "
    "--import-roots, LOCALSERVE_IMPORT_ROOTS)"
)


class OutsideRoots(Exception):
    """A path, or a model folder's member, that resolves outside the folders a client may read
    (server/http/errors.py answers it 403)."""


def reach(path: Path | str, roots: Roots) -> Path:
    """`path` with every link resolved, once proved inside one of `roots`."""
    resolved = _resolved(Path(path).expanduser())
    if not _inside(resolved, roots):
        raise OutsideRoots(f"'{path}' is outside {_ROOTS}")
    _lookable(resolved)
    return resolved


def _lookable(path: Path) -> None:
    """BadModelFile for a path the system will not look up: a name too long for it (found by
    tests/live/test_fuzz_faces.py: `is_dir` raised, a 500), a folder that cannot be searched.
    A path that is simply not there is said by what reads it."""
    try:
        path.stat()
    except (FileNotFoundError, NotADirectoryError):
        pass
    except OSError as exc:
        raise BadModelFile(f"the path cannot be looked up: {exc.strerror}") from None


def members(folder: Path, roots: Roots, shown: Path | None = None) -> list[tuple[Path, str]]:
    """A model folder's files, hidden ones aside: (where its bytes are, resolved and proved
    inside `roots`; its path in the folder). A refused member is named by its place in the
    folder (`shown`, as the client gave it), never by where its link leads. Linked subfolders
    are not entered, as before."""
    found: list[tuple[Path, str]] = []
    for dirpath, _, filenames in os.walk(folder):
        here = Path(dirpath)
        for filename in filenames:
            if filename.startswith("."):
                continue
            relative = (here / filename).relative_to(folder).as_posix()
            real = _resolved(here / filename)
            if not _inside(real, roots):
                raise OutsideRoots(
                    f"'{relative}' in the model folder {shown or folder} links outside "
                    f"{_ROOTS}; nothing was imported"
                )
            if real.is_file():  # a dangling link, a pipe or a device holds no model bytes
                found.append((real, relative))
    return sorted(found, key=lambda m: m[1])


def _resolved(path: Path) -> Path:
    try:
        return path.resolve()
    except RuntimeError:  # Python 3.11 and 3.12 raise it for a loop of links
        raise BadModelFile(f"{path} is a loop of links") from None


def _inside(resolved: Path, roots: Roots) -> bool:
    return roots is None or any(resolved.is_relative_to(root) for root in roots)


def _copy_in(store: ModelStore, source: Path) -> tuple[str, int]:
    """The blob's digest and size. O_NOFOLLOW: a link swapped in for the checked file after the
    check is refused, not followed."""
    hasher = hashlib.sha256()
    partial = store.partial_path("sha256:" + hashlib.sha256(str(source).encode()).hexdigest(), True)
    fd = os.open(source, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_BINARY", 0))
    size = 0
    with os.fdopen(fd, "rb") as src, open(partial, "wb") as out:
        while block := src.read(CHUNK):
            hasher.update(block)
            out.write(block)
            size += len(block)
        out.flush()
        os.fsync(out.fileno())
    digest = f"sha256:{hasher.hexdigest()}"
    os.replace(partial, store.blob_path(digest))
    return digest, size


def _entry(store: ModelStore, real: Path, relative: str, copy: bool) -> ManifestFile:
    if copy:
        digest, size = _copy_in(store, real)
        return ManifestFile(relative, size, digest=digest)
    return ManifestFile(relative, real.stat().st_size, link=str(real))


def import_model(
    store: ModelStore,
    source: Path | str,
    name: str | None = None,
    copy: bool = False,
    roots: Roots = None,
) -> Manifest:
    """Register a GGUF file or an ONNX model folder under `name` (default: from its file name,
    as given: a link's own name, as in the Hugging Face cache, not its blob's)."""
    given = Path(source).expanduser()
    path = reach(given, roots)
    # A folder's members are proved before any is read, its format's marker included.
    files = members(path, roots, given) if path.is_dir() else [(path, given.name)]
    fmt = detect(path)
    if fmt is None:
        raise BadModelFile(f"{given} is neither a GGUF file nor an ONNX model folder")
    described = facts(path, fmt.name)  # refuses a broken model before anything is written
    model_name = parse_name(name) if name else ModelName(slugify(fmt.served_name(given)))
    store.ensure()
    previous = store.read(model_name)
    manifest = Manifest(
        name=model_name,
        format=fmt.name,
        files=[_entry(store, real, relative, copy) for real, relative in files],
        source=str(path),
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


def scan(folder: Path | str, roots: Roots = None) -> list[Found]:
    """Every GGUF file and ONNX model folder under `folder` (an LM Studio or llama.cpp cache),
    named by their paths under `folder` as given. One whose links lead outside `roots` is
    listed with that problem, and is not read."""
    given = Path(folder).expanduser()
    root = reach(given, roots)
    found: list[Found] = []
    for dirpath, dirnames, filenames in os.walk(root):
        here = Path(dirpath)
        shown = given / here.relative_to(root)
        folder_fmt = folder_format(filenames)
        if folder_fmt is not None:
            dirnames.clear()  # a model folder's own subfolders are part of it
            found.append(_examine_folder(here, shown, folder_fmt.name, roots))
            continue
        for filename in sorted(filenames):
            if (file_fmt := file_format(filename)) is not None:
                found.append(_examine_file(here / filename, shown / filename, file_fmt.name, roots))
    return sorted(found, key=lambda f: str(f.path))


def _examine_folder(here: Path, shown: Path, fmt: str, roots: Roots) -> Found:
    try:
        files = members(here, roots, shown)
    except (OutsideRoots, BadModelFile) as exc:
        return Found(shown, None, str(exc), 0)
    return _examine(here, shown, fmt, sum(real.stat().st_size for real, _ in files))


def _examine_file(path: Path, shown: Path, fmt: str, roots: Roots) -> Found:
    try:
        real = _resolved(path)
    except BadModelFile as exc:
        return Found(shown, None, str(exc), 0)
    if not _inside(real, roots):
        return Found(shown, None, f"it links outside {_ROOTS}", 0)
    if not real.is_file():
        return Found(shown, None, "it is not a file (a dangling link?)", 0)
    return _examine(real, shown, fmt, real.stat().st_size)


def _examine(path: Path, shown: Path, fmt: str, size: int) -> Found:
    try:
        return Found(shown, facts(path, fmt), None, size)
    except BadModelFile as exc:
        return Found(shown, None, str(exc), size)
