"""GET /v1/models, and the names a model answers to."""

from __future__ import annotations

from tests.support.helpers import MODEL


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
