"""A GGUF's fill-in-the-middle tokens, as llama.cpp will find them when it loads the file.

llama.cpp (0.3.36's src/llama-vocab.cpp) takes each of the prefix, suffix and middle tokens
from its GGUF key (`tokenizer.ggml.fim_pre_token_id`, or the older `prefix_token_id`), and
failing that from the vocabulary, by the token texts of the families it knows. A model that
lacks any of the three cannot fill in the middle: it gets no "insert" capability, and the
loaded model's `ModelInfo.fim` is None. Read from the header here, so that `list` and `show`
say so without a load.
"""

from __future__ import annotations

from localserve.formats.gguf_header import GGUFHeader, find_strings, string_at

TOKENS = "tokenizer.ggml.tokens"

# Per role: its GGUF keys (the current one first), then the token texts llama.cpp looks for.
_ROLES: tuple[tuple[tuple[str, ...], tuple[str, ...]], ...] = (
    (
        ("tokenizer.ggml.fim_pre_token_id", "tokenizer.ggml.prefix_token_id"),
        (
            "<|fim_prefix|>",
            "<fim-prefix>",
            "<fim_prefix>",
            "<｜fim▁begin｜>",
            "<PRE>",
            "▁<PRE>",
            "<|code_prefix|>",
            "<|prefix|>",
        ),
    ),
    (
        ("tokenizer.ggml.fim_suf_token_id", "tokenizer.ggml.suffix_token_id"),
        (
            "<|fim_suffix|>",
            "<fim-suffix>",
            "<fim_suffix>",
            "<｜fim▁hole｜>",
            "<SUF>",
            "▁<SUF>",
            "<|code_suffix|>",
            "<|suffix|>",
        ),
    ),
    (
        ("tokenizer.ggml.fim_mid_token_id", "tokenizer.ggml.middle_token_id"),
        (
            "<|fim_middle|>",
            "<fim-middle>",
            "<fim_middle>",
            "<｜fim▁end｜>",
            "<MID>",
            "▁<MID>",
            "<|code_middle|>",
            "<|middle|>",
        ),
    ),
)


def fim_texts(header: GGUFHeader) -> tuple[str, str, str] | None:
    """The texts of the model's (prefix, suffix, middle) tokens, or None if it lacks one."""
    pre, suf, mid = (_role_text(header, keys, known) for keys, known in _ROLES)
    if pre is None or suf is None or mid is None:
        return None
    return pre, suf, mid


def _role_text(header: GGUFHeader, keys: tuple[str, ...], known: tuple[str, ...]) -> str | None:
    for key in keys:
        token_id = header.metadata.get(key)
        if isinstance(token_id, int) and not isinstance(token_id, bool):
            return string_at(header, TOKENS, token_id)
    present = find_strings(header, TOKENS, known)
    return next((text for text in known if text in present), None)
