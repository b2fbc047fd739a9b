"""Settings given per model: its answers' cap, and the draft model resolved with it."""

from __future__ import annotations

import pytest

from localserve.engine.residency.per_model import aliased, output_cap, with_draft
from localserve.ground.errors import LoadFailed, ModelNotFound
from localserve.ground.model import ModelRef
from localserve.ground.settings import Settings


def library(name: str, allow_path: bool) -> ModelRef:
    if name == "missing":
        raise ModelNotFound(name)
    return ModelRef(name, f"/m/{name}", "onnx" if name.endswith("-onnx") else "gguf")


def smollm2_with(draft_model: dict[str, str]) -> ModelRef:
    return with_draft(library, Settings(draft_model=draft_model), "smollm2", False)


def test_a_model_without_a_cap_of_its_own_takes_the_default_cap() -> None:
    settings = Settings(max_tokens={"*": 512, "gemma3": 64})
    assert (output_cap(settings, "Gemma3"), output_cap(settings, "smollm2")) == (64, 512)
    assert output_cap(Settings(), "smollm2") is None


def test_a_model_with_a_draft_model_is_resolved_with_it() -> None:
    ref = smollm2_with({"smollm2": "smollm2-draft"})
    assert ref.draft == ModelRef("smollm2-draft", "/m/smollm2-draft")
    assert (ref.name, ref.path) == ("smollm2", "/m/smollm2")


def test_a_model_without_a_draft_model_is_resolved_alone() -> None:
    assert smollm2_with({"gemma3": "g"}) == ModelRef("smollm2", "/m/smollm2")


def test_a_draft_model_that_cannot_be_found_fails_the_load_naming_the_setting() -> None:
    with pytest.raises(LoadFailed, match="--draft-model.*missing"):
        smollm2_with({"smollm2": "missing"})


def test_a_draft_model_of_another_format_is_refused() -> None:
    with pytest.raises(LoadFailed, match="GGUF"):
        smollm2_with({"smollm2": "smol-onnx"})


def test_an_alias_stands_for_its_model_and_any_other_name_for_itself() -> None:
    settings = Settings(alias={"claude-sonnet-4-5": "gemma3"})
    assert aliased(settings, "Claude-Sonnet-4-5:latest") == "gemma3"
    assert aliased(settings, "smollm2") == "smollm2"
