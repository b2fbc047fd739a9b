"""The memory an ONNX model reserves: weights, KV rows, and the larger of its two prefills."""

from __future__ import annotations

from pathlib import Path

from localserve.formats.onnx import OnnxFolder, estimate_onnx

# SmolLM2-135M's shapes, as onnxruntime-genai's builder writes them.
SMOLLM2 = {
    "model": {
        "vocab_size": 49152,
        "decoder": {
            "num_hidden_layers": 30,
            "num_attention_heads": 9,
            "num_key_value_heads": 3,
            "head_size": 64,
            "hidden_size": 576,
        },
    }
}


def folder(tmp_path: Path) -> OnnxFolder:
    return OnnxFolder(tmp_path, SMOLLM2, {})


def test_a_long_context_reserves_one_whole_prompts_logits(tmp_path: Path) -> None:
    """Our rows prefill one prompt of up to max_length in one run, every position's logits
    coming back: 4,096 rows of 49,152 float32 logits alone are 805 MB."""
    estimate = estimate_onnx(folder(tmp_path), "cpu", 8, 4096, 512)
    assert estimate.compute >= 4096 * 49152 * 4


def test_a_short_context_reserves_a_whole_batchs_prefill(tmp_path: Path) -> None:
    """The static Engine prefills every row's prompt at once."""
    estimate = estimate_onnx(folder(tmp_path), "cpu", 8, 512, 512)
    batch_scores = 8 * 9 * 512 * 512 * 4
    assert estimate.compute >= batch_scores + 8 * 512 * 16 * 576 * 4
