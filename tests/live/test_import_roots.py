"""POST /api/admin/import reads only within the models folder and `import_roots`, links
included: an ONNX model folder inside an import root whose files link to a model outside it is
refused (403, naming the member) and nothing is registered; the same folder whose links stay
inside the root is imported. A GGUF linked from inside a root to a file outside is refused too.

The ONNX model is the suite's own (tests/support/onnx_model.py, built once and cached outside
the repository, so outside the daemon's roots).
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.daemons import get_json, post_json
from tests.support.live import running_daemon
from tests.support.onnx_model import ensure_model
from tests.support.store_support import smol_bytes

# Small files are copied into the folder; the weights are the ones linked.
WEIGHTS = ("model.onnx", "model.onnx.data")


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("import-root")


@pytest.fixture(scope="module")
def daemon(root: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    store = tmp_path_factory.mktemp("store")
    args = ["--no-default-model", "--import-roots", str(root), "--models-dir", str(store)]
    with running_daemon(args) as (_, url):
        yield url


def linked_model(folder: Path, weights_from: Path) -> Path:
    """The suite's ONNX model, laid out in `folder` with its weights linked to `weights_from`."""
    model = ensure_model()
    folder.mkdir(parents=True)
    for member in model.iterdir():
        if member.name not in WEIGHTS and member.is_file():
            shutil.copyfile(member, folder / member.name)
    for name in WEIGHTS:
        (folder / name).symlink_to(weights_from / name)
    return folder


def same_bytes(source: Path, target: Path) -> None:
    """`target` holding `source`'s bytes, as a file of its own (not a link out of the root)."""
    try:
        os.link(source, target)
    except OSError:  # another file system
        shutil.copyfile(source, target)


def import_(url: str, path: Path, name: str) -> tuple[int, Any]:
    return post_json(f"{url}/api/admin/import", {"path": str(path), "model": name}, 120)


def listed(url: str) -> set[str]:
    return {m["name"] for m in get_json(f"{url}/api/tags")["models"]}


def test_a_model_folder_linking_outside_the_import_root_is_refused_naming_the_member(
    daemon: str, root: Path
) -> None:
    folder = linked_model(root / "outside-links", ensure_model())
    status, body = import_(daemon, folder, "escaped")
    assert status == 403, body
    assert set(body) == {"error"}, body  # Ollama's shape
    assert "'model.onnx'" in body["error"] and "import_roots" in body["error"], body
    assert str(ensure_model()) not in json.dumps(body)  # where the link leads is not told
    assert "escaped:latest" not in listed(daemon)


def test_a_model_folder_whose_links_stay_inside_the_import_root_is_imported(
    daemon: str, root: Path
) -> None:
    # The Hugging Face cache's layout: the weights beside the folder, the folder linking them.
    weights = root / "blobs"
    weights.mkdir()
    for name in WEIGHTS:
        same_bytes(ensure_model() / name, weights / name)
    folder = linked_model(root / "inside-links", weights)
    status, body = import_(daemon, folder, "cached")
    assert status == 200, body
    assert body["format"] == "onnx" and body["linked"] is True
    assert "cached:latest" in listed(daemon)


def test_a_gguf_linked_from_inside_the_import_root_to_outside_is_refused(
    daemon: str, root: Path
) -> None:
    link = root / "tiny.gguf"
    link.symlink_to(smol_bytes())
    status, body = import_(daemon, link, "tiny")
    assert status == 403, body
    assert "import_roots" in body["error"], body
    assert "tiny:latest" not in listed(daemon)
