"""How much memory a model will take, worked out from its GGUF header before it is loaded.

weights + KV cache for every slot + llama.cpp's compute and output buffers + the prompt cache.
The KV term is layers x kv heads x head dim x 2 (K and V) x 2 bytes (f16) x cells; sliding-window
layers only keep their window. Compute buffers are dominated by the logits of one micro-batch.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from localserve.engine.embedding import embedding_output_bytes
from localserve.store.gguf_file import GGUFHeader

F16 = 2
F32 = 4
PAD = 256  # llama.cpp rounds KV cache sizes up to this many cells
DEFAULT_PROMPT_CACHE = 256 * 1024 * 1024


@dataclass(frozen=True)
class MemoryEstimate:
    weights: int
    kv_cache: int
    compute: int
    # Host memory for slot contents saved after their slot went to another prompt
    # (engine/prompt_cache.py): filled as slots are reused, never past this.
    prompt_cache: int = 0

    @property
    def total(self) -> int:
        return self.weights + self.kv_cache + self.compute + self.prompt_cache

    def as_dict(self) -> dict[str, int]:
        return {**asdict(self), "total": self.total}


def _pad(n: int) -> int:
    return -(-n // PAD) * PAD


def estimate(
    header: GGUFHeader,
    n_slots: int,
    n_ctx_slot: int,
    n_ubatch: int,
    swa_full: bool = True,
    prompt_cache_limit: int = DEFAULT_PROMPT_CACHE,
) -> MemoryEstimate:
    """`swa_full` mirrors llama.cpp's default: sliding-window layers get a full-size cache.

    The prompt cache gets `prompt_cache_limit`, or as much as the slots' KV cache when that is
    less (more would outlast its use for a small model). Models with sliding-window layers get
    none: their saved cells hold only the window, too little to restore a prefix from.
    """
    n_layer = int(header.arch_value("block_count", 0))
    n_embd = int(header.arch_value("embedding_length", 0))
    n_head = int(header.arch_value("attention.head_count", 1) or 1)
    n_head_kv = int(header.arch_value("attention.head_count_kv", n_head) or n_head)
    head_k = int(header.arch_value("attention.key_length", n_embd // n_head))
    head_v = int(header.arch_value("attention.value_length", n_embd // n_head))
    window = int(header.arch_value("attention.sliding_window", 0) or 0)
    n_vocab = int(header.arch_value("vocab_size", 0) or header.array_lengths.get("tokenizer.ggml.tokens", 0))

    cells_full = _pad(n_ctx_slot) * n_slots
    per_cell_layer = n_head_kv * (head_k + head_v) * F16
    n_swa = _sliding_layers(header, n_layer) if window and not swa_full else 0
    cells_swa = min(cells_full, _pad(window + n_ubatch) * n_slots)
    kv = per_cell_layer * ((n_layer - n_swa) * cells_full + n_swa * cells_swa)

    # Logits of a whole micro-batch in f32, plus the activations of its widest layer.
    n_ff = int(header.arch_value("feed_forward_length", 4 * n_embd) or 4 * n_embd)
    compute = n_ubatch * (n_vocab + 2 * n_embd + 2 * n_ff) * F32
    # The output buffer keeps one row of logits per slot between steps; an embedding step grows
    # it to a bounded number of rows of logits and hidden states (engine/embedding.py).
    embedding_output = embedding_output_bytes(n_vocab, n_embd, n_slots, n_ubatch)
    compute += max(n_slots * n_vocab * F32, embedding_output)
    prompt_cache = 0 if window else min(prompt_cache_limit, kv)
    return MemoryEstimate(header.weights_bytes, kv, compute, prompt_cache)


def _sliding_layers(header: GGUFHeader, n_layer: int) -> int:
    """Gemma 2/3 style models alternate sliding-window and global layers."""
    arch = header.architecture
    if arch == "gemma3":
        return n_layer - n_layer // 6  # every sixth layer is global
    if arch == "gemma2":
        return n_layer // 2
    return 0
