"""GET /v1/models, and the names a model answers to; a damaged import in the listings."""

from __future__ import annotations

import shutil
from pathlib import Path

import ollama
import openai
import pytest

from localserve.store.importer import import_model
from localserve.store.library import Library
from tests.support.daemons import get_json
from tests.support.helpers import MODEL
from tests.support.live import CLIENT_TIMEOUT_S
from tests.support.store_support import smol_bytes


def test_models_lists_smollm2(client) -> None:
    models = list(client.models.list())
    assert MODEL in [m.id for m in models]
    entry = next(m for m in models if m.id == MODEL)
    assert entry.object == "model"
    assert entry.owned_by == "localserve"
    assert entry.created > 0


def test_latest_tag_names_the_same_model(client) -> None:
    r = client.completions.create(model=f"{MODEL}:latest", prompt="Hello", max_tokens=1)
    assert r.model == MODEL
    assert r.usage.completion_tokens == 1


@pytest.fixture
def damaged_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A store of three imported copies of SmolLM2, linked: 'whole'; 'moved', whose file was
    deleted; and 'cut', whose file was truncated after the import."""
    store = tmp_path / "store"
    library = Library(store)
    for name in ("whole", "moved", "cut"):
        shutil.copyfile(smol_bytes(), tmp_path / f"{name}.gguf")
        import_model(library.store, tmp_path / f"{name}.gguf", name)
    (tmp_path / "moved.gguf").unlink()
    with open(tmp_path / "cut.gguf", "r+b") as f:
        f.truncate(4096)
    monkeypatch.setenv("LOCALSERVE_MODELS", str(store))
    return store


@pytest.mark.parametrize("args", [(), ("--ctx", "512")], ids=["fitted-context", "fixed-context"])
def test_v1_models_lists_the_others_when_an_import_is_damaged(
    damaged_store: Path, daemon_factory, args: tuple[str, ...]
) -> None:
    _, url = daemon_factory(("--parallel", "1", *args))
    with openai.OpenAI(base_url=f"{url}/v1", api_key="none", timeout=CLIENT_TIMEOUT_S) as client:
        ids = {m.id for m in client.models.list()}
    assert {"whole", MODEL} <= ids
    assert not {"moved", "cut"} & ids


def test_api_tags_marks_a_damaged_import_and_lists_the_others(
    damaged_store: Path, daemon_factory
) -> None:
    _, url = daemon_factory(("--parallel", "1"))
    listed = {m.model: m for m in ollama.Client(host=url, timeout=CLIENT_TIMEOUT_S).list().models}
    assert {"whole:latest", "moved:latest", "cut:latest", f"{MODEL}:latest"} <= set(listed)
    marks = {m["name"]: (m.get("localserve") or {}) for m in get_json(f"{url}/api/tags")["models"]}
    assert "is missing" in marks["moved:latest"]["damaged"]
    assert "holds 4096" in marks["cut:latest"]["damaged"]
    assert "damaged" not in marks["whole:latest"]
