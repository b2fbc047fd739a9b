"""The GGUF format: checking a file, describing it for `show`, and sizing it before a load.

Every GGUF passes `gguf_header.read_header` first: magic, version, tensor count, and every
tensor's offset and size inside the file. A truncated or malformed file is refused here and
never reaches llama.cpp (Ollama's CVE-2026-7482 was an over-read in its loader on such a file).

The memory estimate is weights + KV cache for every slot + llama.cpp's compute and output
buffers + the prompt cache. The KV term is layers x kv heads x head dim x 2 (K and V) x 2 bytes
(f16) x cells; sliding-window layers only keep their window. Compute buffers are dominated by
the logits of one micro-batch.
"""

from __future__ import annotations

from pathlib import Path

from gguf.constants import LlamaFileType

from localserve.formats.errors import BadModelFile
from localserve.formats.gguf_header import BadGGUF, GGUFHeader, read_header
from localserve.formats.memory import MemoryEstimate
from localserve.ground.model import ModelFacts
from localserve.ground.units import F16, F32

PAD = 256  # llama.cpp rounds KV cache sizes up to this many cells

# llama.cpp keeps a row of logits for every output token, even in embeddings mode, and an
# embedding step outputs every token: its output buffer grows to rows x (vocab + width) floats
# and stays. Bounding the rows of an embedding step bounds that buffer; the estimate reserves it.
# 16 MiB keeps the estimate within a few percent of a small model's (84 rows for SmolLM2's
# 49k vocabulary, 16 for Gemma's 262k); a longer input simply takes more steps.
EMBED_OUTPUT_BYTES = 16 << 20


# -- checking and describing ---------------------------------------------------------------------


def check_gguf(path: Path | str) -> GGUFHeader:
    """The file's header, or BadModelFile saying why llama.cpp must never see the file."""
    try:
        return read_header(str(path))
    except BadGGUF as exc:
        raise BadModelFile(f"{path} is not a usable GGUF model: {exc}") from None
    except OSError as exc:
        raise BadModelFile(f"cannot read {path}: {exc}") from None


def quantization(file_type: int | str | None) -> str:
    """`general.file_type` as a name ("Q4_K_M", "F16"), the way Ollama shows it.

    llama.cpp's own description spells some types out ("Q4_K - Medium"), so both `show` and a
    loaded model's info name the quantization from this one field.
    """
    if file_type is None:
        return "unknown"
    try:
        return LlamaFileType(int(file_type)).name.removeprefix("MOSTLY_").removeprefix("ALL_")
    except (TypeError, ValueError):
        return f"type {file_type}"


def gguf_facts(path: Path | str) -> ModelFacts:
    header = check_gguf(path)
    license_ = header.metadata.get("general.license")
    return ModelFacts(
        format="gguf",
        architecture=header.architecture,
        parameters=sum(t.n_elements for t in header.tensors),
        quantization=quantization(header.metadata.get("general.file_type")),
        context_length=int(header.arch_value("context_length", 0) or 0),
        has_chat_template="tokenizer.chat_template" in header.metadata,
        license=str(license_) if license_ else None,
    )


def gguf_chat_template(path: Path | str) -> str | None:
    template = check_gguf(path).metadata.get("tokenizer.chat_template")
    return template if isinstance(template, str) else None


# -- sizing --------------------------------------------------------------------------------------


def embedding_rows(n_vocab: int, n_embd: int, n_slots: int, step_tokens: int) -> int:
    """Tokens one embedding step may carry: as many as step_tokens, within EMBED_OUTPUT_BYTES."""
    per_row = max(1, (n_vocab + n_embd) * F32)
    return max(n_slots, min(step_tokens, EMBED_OUTPUT_BYTES // per_row))


def embedding_output_bytes(n_vocab: int, n_embd: int, n_slots: int, step_tokens: int) -> int:
    """The output buffer an embedding step leaves behind, for the memory estimate."""
    rows = embedding_rows(n_vocab, n_embd, n_slots, step_tokens)
    return rows * (n_vocab + n_embd) * F32


def _pad(n: int) -> int:
    return -(-n // PAD) * PAD


def estimate(
    header: GGUFHeader,
    *,
    n_slots: int,
    n_ctx_slot: int,
    n_ubatch: int,
    prompt_cache_limit: int,
    swa_full: bool,
) -> MemoryEstimate:
    """`swa_full`: sliding-window layers get a full-size cache, as llama.cpp does by default.

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
    # it to a bounded number of rows of logits and hidden states (EMBED_OUTPUT_BYTES).
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
