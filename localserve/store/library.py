"""A user's models, as every face sees them: the store's manifests plus the embedded default.

This is the store's one front door for the engine and the server: resolve a name to a file
to load, list, show, pull and delete. A name that is in the catalog but not pulled, or in no
list at all, fails with the nearest names suggested.
"""

from __future__ import annotations

import hashlib
import logging
import os
from collections.abc import Callable, Iterable
from functools import partial
from pathlib import Path
from typing import Any

from localserve.formats import BadModelFile, chat_template, facts, format_named
from localserve.ground.errors import BadRequest, ModelNotFound
from localserve.ground.model import ModelRef
from localserve.store.catalog import Catalog
from localserve.store.file_digests import file_digest
from localserve.store.manifest import Manifest, ManifestFile
from localserve.store.model_store import ModelStore
from localserve.store.names import ModelName, parse_name
from localserve.store.pull import Report, pull
from localserve.store.resolve import EMBEDDED, embedded_path, resolve_path

log = logging.getLogger(__name__)


class Library:
    def __init__(self, root: Path | str | None = None, catalog: Catalog | None = None) -> None:
        self.store = ModelStore(root)
        self.catalog = catalog or Catalog.load()
        # Each (model, problem) already logged: agents poll the listings every few seconds,
        # and one moved file must not write a warning at every poll.
        self._noted: set[tuple[str, str]] = set()

    # -- what is here ------------------------------------------------------------------------

    def _embedded(self, name: ModelName) -> Manifest | None:
        path = embedded_path(name.short)
        if path is None:
            return None
        entry = self.catalog.get(name)
        package = EMBEDDED[name.short][0]
        # Every embedded model is one GGUF file.
        return self.in_place(
            name,
            path,
            "gguf",
            f"the {package} package",
            entry.license if entry else None,
            entry.context if entry else None,
        )

    def in_place(
        self,
        name: ModelName,
        path: str,
        fmt: str,
        source: str,
        license: str | None = None,
        context: int | None = None,
        embedded: bool = True,
    ) -> Manifest:
        """A manifest for a model file the store does not hold: the embedded default, or a
        file the daemon serves by path."""
        size = os.path.getsize(path) if os.path.isfile(path) else 0
        return Manifest(
            name=name,
            format=fmt,
            files=[ManifestFile(Path(path).name, size, link=path)],
            source=source,
            license=license,
            context=context,
            created_at=os.path.getmtime(path),
            embedded=embedded,
            extra={"facts": facts(path, fmt).as_dict()},
        )

    def digest(self, manifest: Manifest) -> str:
        """The model's digest as Ollama's list shows it: its first blob's, or the sha256 of
        its first file left in place (the embedded model, an import), hashed once and kept."""
        if manifest.digest:
            return manifest.digest
        if manifest.extra.get("served"):
            return _served_file_digest(manifest.files[0].link or "")
        link = next((f.link for f in manifest.files if f.link), None)
        if link is None or not Path(link).is_file():
            return ""
        try:
            self.store.mark()  # the digests are the store's first file in a new folder
        except OSError:
            pass  # a read-only store still answers, as file_digest does
        return file_digest(link, self.store.root / "digests.json")

    def served_digest(self, name: str, path: str) -> str:
        """What `digest` says for a model served from `path`: /api/tags' digest, the store's
        when it lists the model, else that of a file served by path (see _served_file_digest)."""
        try:
            manifest = self.find(parse_name(name))
        except BadRequest:
            return ""
        if manifest is None or str(self._served_at(manifest)) != path:
            return _served_file_digest(path)
        return self.digest(manifest)

    def _served_at(self, manifest: Manifest) -> Path:
        """Where `resolve` serves the model from, found without laying out its folder."""
        link = manifest.files[0].link
        if manifest.embedded and link:
            return Path(link)
        if format_named(manifest.format).is_folder:
            return self.store.folder_path(manifest.name)
        return self.store.file_of(manifest.files[0])

    def find(self, name: ModelName) -> Manifest | None:
        """A pulled or imported model wins over an embedded one of the same name."""
        return self.store.read(name) or self._embedded(name)

    def models(self, served: Iterable[ModelRef] = ()) -> list[Manifest]:
        """Everything `list` shows; reads manifests, never a blob. `served` are the models the
        daemon serves, by name: one the store lacks (`serve --model FILE`) is listed too, since
        agents look a model up in /api/tags before they use it, and pull it when it is not
        there."""
        found = {m.name: m for m in self.store.manifests_on_disk()}
        for short in EMBEDDED:
            name = parse_name(short)
            if name not in found and (m := self._readable(name, self._embedded)) is not None:
                found[name] = m
        for ref in served:
            name = parse_name(ref.name)
            if name not in found and (m := self._readable(name, partial(self._served, ref=ref))):
                found[name] = m
        return sorted(found.values(), key=lambda m: str(m.name))

    def _readable(
        self, name: ModelName, read: Callable[[ModelName], Manifest | None]
    ) -> Manifest | None:
        """A manifest made from a file's own header (the embedded model, one served by path),
        or None when that file went bad: one broken file leaves the rest of a listing."""
        try:
            return read(name)
        except (BadModelFile, OSError) as exc:
            self.note_damage(name.short, str(exc))
            return None

    def damage(self, manifest: Manifest) -> str | None:
        """Why a listed model cannot load (a linked file moved or cut short, a blob lost), or
        None. Only sizes are read, never a blob's bytes, so a listing stays cheap."""
        try:
            self.store.check_files(manifest)
        except BadModelFile as exc:
            self.note_damage(manifest.name.short, str(exc))
            return str(exc)
        return None

    def note_damage(self, name: str, problem: str) -> None:
        """Log a damaged model the first time a listing meets it with this problem."""
        if (name, problem) not in self._noted:
            self._noted.add((name, problem))
            log.warning("listings leave out or mark model '%s' as damaged: %s", name, problem)

    def _served(self, name: ModelName, ref: ModelRef) -> Manifest | None:
        """A manifest for a model the daemon serves by path, while its file is there."""
        if not os.path.exists(ref.path):
            return None
        manifest = self.in_place(name, ref.path, ref.format, ref.path, embedded=False)
        manifest.extra["served"] = True
        return manifest

    def suggest(self, text: str) -> list[str]:
        return self.catalog.suggest(text, also=[m.name.short for m in self.models()])

    def not_found(self, text: str) -> ModelNotFound:
        try:
            name = parse_name(text)
        except BadRequest:
            name = None
        if name is not None and self.catalog.get(name) is not None:
            return ModelNotFound(
                text,
                "it is in the catalog but not pulled yet: "
                f"pull it first (localserve pull {name.short})",
            )
        close = self.suggest(text)
        return ModelNotFound(
            text, f"did you mean {', '.join(close)}?" if close else "pull it first"
        )

    # -- for the engine ----------------------------------------------------------------------

    def resolve(self, text: str, allow_path: bool = False) -> ModelRef:
        """A name must be in the library; a path (operator only) is served under its file name."""
        by_path = resolve_path(text) if allow_path else None
        if by_path is not None:
            return by_path
        manifest = self.find(parse_name(text))
        if manifest is None:
            raise self.not_found(text)
        self.store.check_files(manifest)
        return ModelRef(manifest.name.short, str(self._path(manifest)), manifest.format)

    def _path(self, manifest: Manifest) -> Path:
        link = manifest.files[0].link
        return Path(link) if manifest.embedded and link else self.store.model_path(manifest)

    # -- for the store endpoints -------------------------------------------------------------

    def show(self, text: str, served: ModelRef | None = None) -> tuple[Manifest, dict[str, Any]]:
        """The manifest and what the model file says about itself (a header read, no load).

        `served` is the model the daemon serves under that name by path, if the store has none.
        """
        manifest = self.find(parse_name(text))
        if manifest is None and served is not None:
            manifest = self.in_place(
                parse_name(served.name), served.path, served.format, served.path, embedded=False
            )
            path = Path(served.path)
        elif manifest is None:
            raise self.not_found(text)
        else:
            path = self._path(manifest)
        described = facts(path, manifest.format).as_dict()
        described["license"] = described["license"] or manifest.license
        described["chat_template"] = chat_template(path, manifest.format)
        return manifest, described

    def delete(self, text: str) -> int:
        name = parse_name(text)
        if self.store.read(name) is None:
            if self._embedded(name) is not None:
                package = EMBEDDED[name.short][0]
                raise BadRequest(
                    f"'{name.short}' ships inside the {package} package and cannot be deleted",
                    "model",
                )
            raise self.not_found(text)
        return self.store.delete(name)

    def pull(self, text: str, report: Report, served: Iterable[ModelRef] = ()) -> Manifest:
        """Blocking: run on a worker thread. A model already here is not downloaded again:
        the embedded default, an import, or one pulled before answer Ollama's stream for a
        model whose files are all present at once (Codex pulls every model it is told to use
        that /api/tags does not list by its exact name). `rm` first fetches a newer one."""
        name = None if "/" in text else parse_name(text)
        stored = self.store.read(name) if name is not None else None
        if name is not None and stored is None:
            stored = self._embedded(name)
        if stored is None and name is not None:
            ref = next((r for r in served if parse_name(r.name) == name), None)
            stored = self._served(name, ref) if ref is not None else None
        if stored is not None:
            return _already_here(stored, report)
        return pull(self.store, self.catalog, text, report)


def _already_here(stored: Manifest, report: Report) -> Manifest:
    """Ollama's pull stream for a model whose files are all here: each file complete, then
    success, with nothing downloaded."""
    report({"status": "pulling manifest"})
    for file in stored.files:
        digest = file.digest or _served_file_digest(file.link or file.path)
        report(
            {
                "status": f"pulling {digest.removeprefix('sha256:')[:12]}",
                "digest": digest,
                "total": file.size,
                "completed": file.size,
            }
        )
    report({"status": "success"})
    return stored


def _served_file_digest(path: str) -> str:
    """A digest for a file served by path, from where it is, its size and its time: stable while
    the file is, and cheap (hashing gigabytes would hold /api/tags and /api/ps for seconds)."""
    try:
        stat = os.stat(path)
    except OSError:
        return ""
    identity = f"{os.path.abspath(path)}\0{stat.st_size}\0{stat.st_mtime_ns}"
    return "sha256:" + hashlib.sha256(identity.encode("utf-8", "surrogateescape")).hexdigest()
