"""A store model whose files went bad (a linked file moved or cut short): the library names the
damage for the listings to leave it out or mark it, and logs it once, not at every listing."""

from __future__ import annotations

import logging
import shutil
from pathlib import Path

import pytest

from localserve.ground.model import ModelRef
from localserve.store.importer import import_model
from localserve.store.library import Library
from localserve.store.manifest import Manifest
from tests.support.store_support import smol_bytes


@pytest.fixture
def lib(tmp_path: Path) -> Library:
    return Library(tmp_path / "store")


def imported(lib: Library, tmp_path: Path, name: str) -> Path:
    mine = tmp_path / f"{name}.gguf"
    shutil.copyfile(smol_bytes(), mine)
    import_model(lib.store, mine, name)
    return mine


def manifest_of(lib: Library, name: str) -> Manifest:
    return next(m for m in lib.models() if m.name.short == name)


def test_a_whole_import_has_no_damage(lib: Library, tmp_path: Path) -> None:
    imported(lib, tmp_path, "whole")
    assert lib.damage(manifest_of(lib, "whole")) is None


def test_an_import_whose_file_moved_is_damaged(lib: Library, tmp_path: Path) -> None:
    imported(lib, tmp_path, "moved").unlink()
    assert "is missing" in (lib.damage(manifest_of(lib, "moved")) or "")


def test_an_import_cut_short_after_it_was_imported_is_damaged(lib: Library, tmp_path: Path) -> None:
    with open(imported(lib, tmp_path, "cut"), "r+b") as f:
        f.truncate(1000)
    assert "holds 1000" in (lib.damage(manifest_of(lib, "cut")) or "")


def test_a_damaged_model_is_logged_once_however_often_it_is_listed(
    lib: Library, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    imported(lib, tmp_path, "moved").unlink()
    with caplog.at_level(logging.WARNING, logger="localserve.store.library"):
        for _ in range(5):
            for manifest in lib.models():
                lib.damage(manifest)
    assert len([r for r in caplog.records if "moved" in r.getMessage()]) == 1


def test_a_file_served_by_path_that_went_bad_leaves_the_rest_of_the_list(
    lib: Library, tmp_path: Path
) -> None:
    imported(lib, tmp_path, "whole")
    bad = tmp_path / "served.gguf"
    bad.write_bytes(b"GGUF" + b"\0" * 60)
    listed = lib.models([ModelRef("served", str(bad), "gguf")])
    assert "whole" in {m.name.short for m in listed}
    assert "served" not in {m.name.short for m in listed}
