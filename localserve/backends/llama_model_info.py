"""What a loaded GGUF model tells about itself: its ModelInfo, read from llama.cpp."""

from __future__ import annotations

import ctypes

import llama_cpp as ll

from localserve.formats.gguf import quantization
from localserve.ground.model import ModelInfo


def model_info(
    name: str,
    path: str,
    model: ll.llama_model_p,
    ctx: ll.llama_context_p,
    n_slots: int,
    kv: tuple[str, str] = ("f16", "auto"),
) -> ModelInfo:
    """`kv`: the KV cache's type and flash attention it loaded with."""
    vocab = ll.llama_model_get_vocab(model)
    template = ll.llama_model_chat_template(model, None)
    return ModelInfo(
        name=name,
        path=path,
        format="gguf",
        n_slots=n_slots,
        n_ctx_slot=int(ll.llama_n_ctx_seq(ctx)),
        n_ctx_train=int(ll.llama_model_n_ctx_train(model)),
        size_bytes=int(ll.llama_model_size(model)),
        chat_template=template.decode("utf-8", errors="replace") if template else None,
        bos_text=_special_text(vocab, ll.llama_vocab_bos(vocab)),
        eos_text=_special_text(vocab, ll.llama_vocab_eos(vocab)),
        add_bos=bool(ll.llama_vocab_get_add_bos(vocab)),
        architecture=meta(model, "general.architecture") or "unknown",
        quantization=quantization(meta(model, "general.file_type")),
        n_params=int(ll.llama_model_n_params(model)),
        n_embd=int(ll.llama_model_n_embd(model)),
        fim=_fim_tokens(vocab),
        fim_repo=(int(ll.llama_vocab_fim_rep(vocab)), int(ll.llama_vocab_fim_sep(vocab))),
        kv_cache_type=kv[0],
        flash_attention=kv[1],
    )


def meta(model: ll.llama_model_p, key: str) -> str | None:
    """A GGUF metadata value as text; None where the file has no such key."""
    buf = ctypes.create_string_buffer(256)
    n = ll.llama_model_meta_val_str(model, key.encode(), buf, len(buf))
    return buf.value.decode("utf-8", errors="replace") if n >= 0 else None


def _fim_tokens(vocab: ll.llama_vocab_p) -> tuple[int, int, int] | None:
    """llama.cpp's FIM ids: the GGUF keys, else the family's known token texts; -1 is none,
    and a model lacking any of the three cannot fill in the middle."""
    ids = (
        int(ll.llama_vocab_fim_pre(vocab)),
        int(ll.llama_vocab_fim_suf(vocab)),
        int(ll.llama_vocab_fim_mid(vocab)),
    )
    return ids if min(ids) >= 0 else None


def _special_text(vocab: ll.llama_vocab_p, token: int) -> str:
    if token < 0:
        return ""
    text = ll.llama_vocab_get_text(vocab, token)
    return text.decode("utf-8", errors="replace") if text else ""
