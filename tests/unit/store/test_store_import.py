"""Importing models a user already has, and scanning a folder of them."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from localserve.formats import BadModelFile
from localserve.ground.model import ModelFacts
from localserve.store import importer
from localserve.store.importer import OutsideRoots, import_model, scan
from localserve.store.library import Library
from localserve.store.names import parse_name
from tests.support.store_support import smol_bytes, truncated_copy

FAKE_FACTS = ModelFacts("onnx", "llama", 1, "int4", 512, True, None)


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


def test_a_path_too_long_for_the_system_is_refused_at_import(lib: Library, tmp_path: Path) -> None:
    with pytest.raises(BadModelFile, match="cannot be looked up"):
        import_model(lib.store, tmp_path / ("a" * 300) / "mine.gguf")


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


# -- the folders a client may read: every link resolved, every member proved inside -----------


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """An import root; `tmp_path / "outside"` is not in it."""
    folder = tmp_path / "root"
    folder.mkdir()
    (tmp_path / "outside").mkdir()
    return folder


def onnx_folder(folder: Path) -> Path:
    """A folder laid out as an ONNX model (its marker, genai_config.json); its files are fakes,
    enough for the path rule, which runs before any model file is read."""
    folder.mkdir(parents=True)
    (folder / "genai_config.json").write_text("{}")
    (folder / "tokenizer.json").write_text("{}")
    return folder


def test_a_model_folder_whose_member_links_outside_the_roots_is_refused_naming_it(
    lib: Library, root: Path, tmp_path: Path
) -> None:
    secret = tmp_path / "outside" / "id_ed25519"
    secret.write_text("PRIVATE KEY")
    folder = onnx_folder(root / "model")
    (folder / "model.onnx").symlink_to(secret)
    with pytest.raises(OutsideRoots) as refused:
        import_model(lib.store, folder, "sneaky", roots=[root.resolve()])
    assert "'model.onnx'" in str(refused.value)
    assert str(secret) not in str(refused.value)  # where the link leads is not told
    assert lib.store.read(parse_name("sneaky")) is None
    assert not lib.store.blobs.exists() or not list(lib.store.blobs.iterdir())


def test_a_model_folder_whose_member_links_outside_is_refused_before_any_file_is_read(
    lib: Library, root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = onnx_folder(root / "model")
    (folder / "genai_config.json").unlink()
    (folder / "genai_config.json").symlink_to(tmp_path / "outside" / "genai_config.json")
    (tmp_path / "outside" / "genai_config.json").write_text("{}")
    read: list[Path] = []
    monkeypatch.setattr(importer, "facts", lambda path, fmt: read.append(path))
    with pytest.raises(OutsideRoots, match="'genai_config.json'"):
        import_model(lib.store, folder, roots=[root.resolve()])
    assert read == []


def test_a_model_folder_is_registered_from_the_resolved_paths_it_checked(
    lib: Library, root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The Hugging Face cache's layout: a snapshot's files are links to blobs beside it.
    blob = root / "blobs" / "5f2a"
    blob.parent.mkdir()
    blob.write_bytes(b"weights")
    folder = onnx_folder(root / "snapshots" / "main")
    (folder / "model.onnx").symlink_to(Path("../../blobs/5f2a"))
    monkeypatch.setattr(importer, "facts", lambda path, fmt: FAKE_FACTS)
    manifest = import_model(lib.store, folder, "cached", roots=[root.resolve()])
    entries = {f.path: f for f in manifest.files}
    assert set(entries) == {"genai_config.json", "model.onnx", "tokenizer.json"}
    assert entries["model.onnx"].link == str(blob.resolve())
    assert entries["model.onnx"].size == len(b"weights")


def test_a_gguf_link_that_leads_outside_the_roots_is_refused(
    lib: Library, root: Path, tmp_path: Path
) -> None:
    outside = tmp_path / "outside" / "theirs.gguf"
    shutil.copyfile(smol_bytes(), outside)
    (root / "mine.gguf").symlink_to(outside)
    with pytest.raises(OutsideRoots, match="is outside the folders import and scan may read"):
        import_model(lib.store, root / "mine.gguf", roots=[root.resolve()])
    assert lib.store.read(parse_name("mine")) is None


def test_a_gguf_link_inside_the_roots_is_served_under_the_links_own_name(
    lib: Library, root: Path
) -> None:
    blob = root / "blobs" / "9c1e"
    blob.parent.mkdir()
    shutil.copyfile(smol_bytes(), blob)
    link = root / "snapshots" / "main" / "tiny.gguf"
    link.parent.mkdir(parents=True)
    link.symlink_to(blob)
    manifest = import_model(lib.store, link, roots=[root.resolve()])
    assert manifest.name.short == "tiny"
    assert manifest.files[0].link == str(blob.resolve())


def test_scan_lists_a_model_linked_outside_the_roots_without_reading_it(
    root: Path, tmp_path: Path
) -> None:
    outside = tmp_path / "outside" / "theirs.gguf"
    shutil.copyfile(smol_bytes(), outside)
    (root / "mine.gguf").symlink_to(outside)
    (found,) = scan(root, roots=[root.resolve()])
    assert found.path == root / "mine.gguf"
    assert found.facts is None and found.size == 0
    assert found.problem and "links outside" in found.problem


def test_scan_flags_a_model_folder_whose_member_links_outside_the_roots(
    root: Path, tmp_path: Path
) -> None:
    (tmp_path / "outside" / "weights").write_bytes(b"w")
    folder = onnx_folder(root / "model")
    (folder / "model.onnx").symlink_to(tmp_path / "outside" / "weights")
    (found,) = scan(root, roots=[root.resolve()])
    assert found.facts is None and found.size == 0
    assert found.problem and "'model.onnx'" in found.problem
