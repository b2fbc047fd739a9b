"""A KV cache's type per model (#47): the estimate counts each type's bytes, so a pool holds
about twice the cells in q8_0 and three times in q4_0; a quantized cache without flash
attention is refused plainly. Sized on the embedded SmolLM2's real header."""

from __future__ import annotations

import pytest

from localserve.engine.worker_client.sizing import layered_estimate
from localserve.ground import kv_cache
from localserve.ground.errors import LoadFailed
from localserve.ground.settings import Settings
from localserve.store.resolve import resolve


def kv_bytes(kv_cache_type: dict[str, str] | None) -> int:
    settings = Settings(parallel=4, ctx=2048, kv_cache_type=kv_cache_type)
    return sum(layered_estimate(resolve("smollm2"), settings).layer_kv)


def test_a_q8_0_cache_is_estimated_at_34_32nds_of_a_byte_an_element() -> None:
    assert kv_bytes({"*": "q8_0"}) == pytest.approx(kv_bytes(None) * (34 / 32) / 2, rel=1e-3)


def test_a_q4_0_cache_is_estimated_at_18_32nds_of_a_byte_an_element() -> None:
    assert kv_bytes({"*": "q4_0"}) == pytest.approx(kv_bytes(None) * (18 / 32) / 2, rel=1e-3)


def test_a_type_named_for_another_model_leaves_this_one_f16() -> None:
    assert kv_bytes({"gemma3": "q8_0"}) == kv_bytes(None)


def test_a_model_named_in_the_setting_takes_its_own_type_over_the_rest() -> None:
    settings = Settings(kv_cache_type={"*": "q4_0", "smollm2": "q8_0"})
    assert kv_cache.cache_type(settings, "SmolLM2") == "q8_0"
    assert kv_cache.cache_type(settings, "gemma3") == "q4_0"


def test_the_automatic_context_grows_with_a_smaller_cache_type_in_the_same_room() -> None:
    def fitted(kv: dict[str, str] | None) -> int:
        settings = Settings(parallel=16, kv_cache_type=kv)
        return layered_estimate(resolve("smollm2"), settings, 2 << 30).n_ctx_slot

    assert fitted(None) < 8192 == fitted({"*": "q8_0"})  # 4352 against the trained 8192


def test_a_quantized_cache_with_flash_attention_off_is_refused_naming_both_settings() -> None:
    with pytest.raises(LoadFailed, match="--flash-attention auto or on, or --kv-cache-type f16"):
        kv_cache.check("q8_0", "off")
    kv_cache.check("f16", "off")
    kv_cache.check("q4_0", "auto")


def test_cache_settings_that_name_an_onnx_model_are_reported_as_not_applied() -> None:
    settings = Settings(kv_cache_type={"*": "q8_0"}, flash_attention={"tiny-onnx": "on"})
    why = kv_cache.not_applied(settings, "tiny-onnx", "f32")
    assert why is not None
    assert "--kv-cache-type q8_0 and --flash-attention on" in why
    assert "keeps this model's KV cache in f32" in why


def test_an_onnx_model_that_no_cache_setting_names_is_loaded_without_a_word() -> None:
    assert (
        kv_cache.not_applied(Settings(kv_cache_type={"gemma3": "q8_0"}), "tiny-onnx", "f32") is None
    )
