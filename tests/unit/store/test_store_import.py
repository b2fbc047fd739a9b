"""Importing models a user already has, and scanning a folder of them."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from localserve.formats import BadModelFile
from localserve.store.importer import import_model, scan
from localserve.store.library import Library
from tests.support.store_support import smol_bytes, truncated_copy


@pytest.fixture
def lib(tmp_path: Path) -> Library:
    return Library(tmp_path / "store")


def test_an_import_links_the_file_by_default(lib: Library, tmp_path: Path) -> None:
    mine = tmp_path / "mine.gguf"
    shutil.copyfile(smol_bytes(), mine)
    manifest = import_model(lib.store, mine)
    assert manifest.name.short == "mine"
    assert manifest.files[0].link == str(mine.resolve())
    assert lib.resolve("mine").path == str(mine.resolve())
    assert not list(lib.store.blobs.glob("*"))


def test_deleting_a_linked_import_keeps_the_users_file(lib: Library, tmp_path: Path) -> None:
    mine = tmp_path / "mine.gguf"
    shutil.copyfile(smol_bytes(), mine)
    import_model(lib.store, mine, "kept")
    lib.delete("kept")
    assert mine.is_file()
    assert "kept:latest" not in {str(m.name) for m in lib.models()}


def test_an_import_with_copy_stores_a_blob(lib: Library) -> None:
    manifest = import_model(lib.store, smol_bytes(), "copied:v1", copy=True)
    blob = lib.store.blob_path(manifest.files[0].digest)
    assert blob.stat().st_size == smol_bytes().stat().st_size
    assert lib.resolve("copied:v1").path == str(blob)


def test_a_truncated_gguf_is_refused_at_import(lib: Library, tmp_path: Path) -> None:
    with pytest.raises(BadModelFile, match="not a usable GGUF"):
        import_model(lib.store, truncated_copy(smol_bytes(), tmp_path), "broken")
    assert "broken:latest" not in {str(m.name) for m in lib.models()}


def test_a_file_that_is_not_gguf_is_refused_at_import(lib: Library, tmp_path: Path) -> None:
    junk = tmp_path / "junk.gguf"
    junk.write_bytes(b"not a model at all" * 100)
    with pytest.raises(BadModelFile):
        import_model(lib.store, junk)


def test_scan_lists_the_models_in_a_folder_and_flags_broken_ones(tmp_path: Path) -> None:
    cache = tmp_path / "lmstudio" / "models" / "org" / "repo"
    cache.mkdir(parents=True)
    shutil.copyfile(smol_bytes(), cache / "good.gguf")
    truncated_copy(smol_bytes(), cache)
    (cache / "notes.txt").write_text("not a model")
    found = {f.path.name: f for f in scan(tmp_path / "lmstudio")}
    assert set(found) == {"good.gguf", f"truncated-{smol_bytes().name}"}
    assert found["good.gguf"].facts is not None and found["good.gguf"].facts.architecture == "llama"
    assert found[f"truncated-{smol_bytes().name}"].problem
