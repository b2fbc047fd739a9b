"""The GGUF format: checking a file, describing it for `show`, and sizing it before a load.

Every GGUF passes `gguf_header.read_header` first: magic, version, tensor count, and every
tensor's offset and size inside the file. A truncated or malformed file is refused here and
never reaches llama.cpp (Ollama's CVE-2026-7482 was an over-read in its loader on such a file).

The memory estimate is weights + KV cache for every slot + llama.cpp's compute and output
buffers + the prompt cache, by layer (formats/offload.py splits it between the CPU and a
device). The KV term is layers x kv heads x head dim x 2 (K and V) x an element's bytes (2
for f16, 34/32 for q8_0, 18/32 for q4_0) x cells; sliding-window layers only keep their
window. Compute buffers are dominated by the logits of one micro-batch.
"""

from __future__ import annotations

from pathlib import Path

from gguf.constants import LlamaFileType

from localserve.formats.call_syntax import syntax_of
from localserve.formats.errors import BadModelFile
from localserve.formats.gguf_fim import TOKENS, fim_texts
from localserve.formats.gguf_header import BadGGUF, GGUFHeader, read_header, string_at
from localserve.formats.offload import INPUT, LayeredEstimate
from localserve.ground.model import ModelFacts
from localserve.ground.units import F16, F32

PAD = 256  # llama.cpp rounds KV cache sizes up to this many cells
POOLING_NONE, POOLING_RANK = 0, 4  # llama_pooling_type

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
        embedding_length=int(header.arch_value("embedding_length", 0) or 0),
        basename=_text(
            header.metadata.get("general.basename") or header.metadata.get("general.name")
        ),
        capabilities=_capabilities(header),
        fim_tokens=fim_texts(header),
        stop_tokens=_stop_tokens(header),
    )


def _stop_tokens(header: GGUFHeader) -> tuple[str, ...]:
    texts = []
    for key in ("tokenizer.ggml.eos_token_id", "tokenizer.ggml.eot_token_id"):
        token_id = header.metadata.get(key)
        if isinstance(token_id, int) and not isinstance(token_id, bool):
            text = string_at(header, TOKENS, token_id)
            if text and text not in texts:
                texts.append(text)
    return tuple(texts)


def _capabilities(header: GGUFHeader) -> tuple[str, ...]:
    """Any generative GGUF also embeds here (its hidden states, mean-pooled, as Ollama pools
    them); a model with a pooling type of its own is an embedding model, and only embeds;
    a reranker (pooling RANK) does neither here."""
    pooling = header.arch_value("pooling_type")
    if pooling is None or int(pooling) == POOLING_NONE:
        return ("completion", *_insert(header), *_chat(header), "embedding")
    return () if int(pooling) == POOLING_RANK else ("embedding",)


def _insert(header: GGUFHeader) -> tuple[str, ...]:
    """Ollama's "insert" (fill-in-the-middle) for a model whose FIM tokens llama.cpp will find."""
    return ("insert",) if fim_texts(header) is not None else ()


def _chat(header: GGUFHeader) -> tuple[str, ...]:
    """Ollama's "tools" and "thinking", from the chat template: "tools" where it renders them in
    a syntax formats/call_syntax.py reads (any model still takes tools, through the generic
    prompt)."""
    template = header.metadata.get("tokenizer.chat_template")
    template = template if isinstance(template, str) else None
    fmt, reasoning = syntax_of(template)
    tools = ("tools",) if fmt.native else ()
    return (*tools, *(("thinking",) if reasoning is not None else ()))


def _text(value: object) -> str | None:
    return str(value) if isinstance(value, str) and value else None


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


def layered(
    header: GGUFHeader,
    *,
    n_slots: int,
    n_ctx_slot: int,
    n_ubatch: int,
    prompt_cache_limit: int,
    swa_full: bool,
    kv_element_bytes: float = F16,
) -> LayeredEstimate:
    """The estimate by layer, from the tensor table, so that layers can be offloaded.

    `swa_full`: sliding-window layers get a full-size cache, as llama.cpp does by default.
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
    n_vocab = int(
        header.arch_value("vocab_size", 0) or header.array_lengths.get("tokenizer.ggml.tokens", 0)
    )

    cells_full = _pad(n_ctx_slot) * n_slots
    per_cell_layer = round(n_head_kv * (head_k + head_v) * kv_element_bytes)
    cells_swa = min(cells_full, _pad(window + n_ubatch) * n_slots)
    sliding = _sliding_layers(header, n_layer) if window and not swa_full else frozenset()
    layer_kv = tuple(
        per_cell_layer * (cells_swa if i in sliding else cells_full) for i in range(n_layer)
    )

    layer_weights = [0] * n_layer
    input_weights = output_weights = 0
    placed: list[tuple[int, int, int]] = []
    for tensor in header.tensors:
        layer = _layer_of(tensor.name)
        if layer is not None and layer < n_layer:
            layer_weights[layer] += tensor.n_bytes
        elif tensor.name.startswith("output"):  # output.weight, output_norm.weight
            layer, output_weights = n_layer, output_weights + tensor.n_bytes
        else:  # token_embd.weight and the rest of the input layer
            layer, input_weights = INPUT, input_weights + tensor.n_bytes
        placed.append((layer, tensor.offset, tensor.n_bytes))
    # No output.weight: the head is token_embd, and a device that holds the output gets a copy.
    tied = not any(t.name == "output.weight" for t in header.tensors)
    embeddings = next((t.n_bytes for t in header.tensors if t.name == "token_embd.weight"), 0)
    head = (
        embeddings
        if tied
        else max((t.n_bytes for t in header.tensors if t.name == "output.weight"), default=0)
    )

    # Calibrated against llama.cpp's compute buffers (CPU and Vulkan, SmolLM2 and Gemma 3):
    # a micro-batch's logits in f32; a layer's activations (the gated FFN's three n_ff-wide
    # products, the queries, the residual stream twice); the inputs (embeddings twice).
    n_ff = int(header.arch_value("feed_forward_length", 4 * n_embd) or 4 * n_embd)
    logits = n_ubatch * n_vocab * F32
    activations = n_ubatch * (3 * n_ff + n_head * head_k + 2 * n_embd) * F32
    # The output buffer keeps one row of logits per slot between steps; an embedding step grows
    # it to a bounded number of rows of logits and hidden states (EMBED_OUTPUT_BYTES).
    output_buffer = n_slots * n_vocab * F32
    embedding_output = embedding_output_bytes(n_vocab, n_embd, n_slots, n_ubatch)
    prompt_cache = 0 if window else min(prompt_cache_limit, sum(layer_kv))
    return LayeredEstimate(
        input_weights=input_weights,
        output_weights=output_weights,
        layer_weights=tuple(layer_weights),
        layer_kv=layer_kv,
        compute_layer=activations,
        compute_logits=logits,
        compute_input=2 * n_ubatch * n_embd * F32,
        output_buffer=output_buffer,
        prompt_cache=prompt_cache,
        embedding_output=max(0, embedding_output - output_buffer),
        output_copy=embeddings if tied else 0,
        output_largest=head,
        compute_mask=cells_full * n_ubatch * F16,
        tensors=tuple(placed),
        n_ctx_slot=n_ctx_slot,
    )


def _layer_of(tensor: str) -> int | None:
    """`blk.12.attn_q.weight` -> 12."""
    if not tensor.startswith("blk."):
        return None
    number = tensor[4:].split(".", 1)[0]
    return int(number) if number.isdigit() else None


def _sliding_layers(header: GGUFHeader, n_layer: int) -> frozenset[int]:
    """Gemma 2/3 style models alternate sliding-window and global layers."""
    arch = header.architecture
    if arch == "gemma3":  # every sixth layer is global
        return frozenset(i for i in range(n_layer) if i % 6 != 5)
    if arch == "gemma2":
        return frozenset(i for i in range(n_layer) if i % 2 == 0)
    return frozenset()
