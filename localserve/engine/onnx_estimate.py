"""How much memory an onnxruntime-genai model will take, from its folder, before it loads.

weights (the graph and its external data, mapped whole) + KV buffers + a prefill's activations.
With past_present_share_buffer the KV buffers are sized once for the whole batch: layers x kv
heads x head size x 2 (K and V) x max length x batch size, in the graph's I/O type (float32 for
models exported for the CPU, float16 for GPU exports). The manager reserves the total in the same
pool as GGUF models, so the LRU treats both formats alike.
"""

from __future__ import annotations

from localserve.backends.onnx_folder import OnnxFolder
from localserve.engine.estimate import MemoryEstimate

F16 = 2
F32 = 4


def kv_bytes_per_token(folder: OnnxFolder, provider: str) -> int:
    io_size = F32 if provider == "cpu" else F16
    return folder.n_layer * folder.n_head_kv * folder.head_size * 2 * io_size


def estimate_onnx(
    folder: OnnxFolder, provider: str, max_batch_size: int, max_length: int, prefill_tokens: int
) -> MemoryEstimate:
    """`prefill_tokens`: the longest prompt a batch prefills at once, per row (its logits rows)."""
    kv = kv_bytes_per_token(folder, provider) * max_length * max_batch_size
    # A prefill's activations: about 16 hidden-size rows per prompt token across the widest
    # layer (the MLP's up projection and its activation), the attention scores of each head,
    # and one row of float32 logits per sequence (the graph returns the last position's only).
    # Measured for SmolLM2 int4 on the CPU: 8 prompts of 482 tokens grew the daemon by about
    # 470 MB, against 690 MB estimated here.
    prefill = min(prefill_tokens, max_length)
    activations = max_batch_size * prefill * 16 * folder.n_embd * F32
    scores = max_batch_size * folder.n_head * prefill * prefill * F32
    logits = max_batch_size * folder.n_vocab * F32
    return MemoryEstimate(folder.weights_bytes, kv, activations + scores + logits)
