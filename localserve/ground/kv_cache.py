"""A model's KV cache as the settings choose it, per model: its type (f16, q8_0, q4_0) and
llama.cpp's flash attention (auto, on, off). The daemon's estimate and the worker's load read
the same choice, so that the pool reserves what the worker allocates.
"""

from __future__ import annotations

from localserve.ground.errors import LoadFailed
from localserve.ground.setting_kinds import for_model
from localserve.ground.settings import Settings

# ggml_type of each cache type, as llama_context_params.type_k / type_v take it.
GGML_TYPES = {"f16": 1, "q4_0": 2, "q8_0": 8}
# Bytes an element takes: q8_0 keeps 32 values in 34 bytes (a scale and 32 bytes), q4_0 in 18.
ELEMENT_BYTES = {"f16": 2.0, "q8_0": 34 / 32, "q4_0": 18 / 32}
# llama_flash_attn_type: auto lets llama.cpp turn it on where the device has it.
FLASH_TYPES = {"auto": -1, "off": 0, "on": 1}


def cache_type(settings: Settings, model: str) -> str:
    """The type of `model`'s KV cache (by its name)."""
    return for_model(settings.kv_cache_type, model) or "f16"


def flash_attention(settings: Settings, model: str) -> str:
    return for_model(settings.flash_attention, model) or "auto"


def element_bytes(settings: Settings, model: str) -> float:
    return ELEMENT_BYTES[cache_type(settings, model)]


def check(kv_type: str, flash: str) -> None:
    """Refuses, before llama.cpp fails less plainly, a quantized cache without flash attention."""
    if kv_type != "f16" and flash == "off":
        raise LoadFailed(
            f"a {kv_type} KV cache needs flash attention (llama.cpp quantizes V only with it): "
            "set --flash-attention auto or on, or --kv-cache-type f16"
        )


def not_applied(settings: Settings, model: str, kept_in: str) -> str | None:
    """Why the cache settings that name a model whose runtime keeps its cache as exported
    (onnxruntime-genai's) change nothing for it, or None where they name nothing. As Ollama
    does where a model cannot take OLLAMA_KV_CACHE_TYPE, the model loads and the log says so."""
    asked = [
        f"--{flag} {value}"
        for flag, value in (
            ("kv-cache-type", for_model(settings.kv_cache_type, model)),
            ("flash-attention", for_model(settings.flash_attention, model)),
        )
        if value is not None
    ]
    if not asked:
        return None
    return (
        f"{model}: {' and '.join(asked)} apply to llama.cpp's models only; onnxruntime-genai "
        f"keeps this model's KV cache in {kept_in}, as it was exported"
    )
