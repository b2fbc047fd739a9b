"""The bytes each token of an onnxruntime-genai model stands for, read from its tokenizer.json.

The engine's detokenizer wants bytes per token, so that a character split over two tokens is
never emitted half. onnxruntime-genai only decodes to text, which replaces half a character
with U+FFFD, so the table is built here from the Hugging Face tokenizer file the folder carries.
Two encodings cover the models onnxruntime-genai serves: byte-level BPE (GPT-2, SmolLM, Qwen,
Llama 3, Phi-4) and SentencePiece with byte fallback (Llama 2, Phi-3, Mistral).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

_BYTE_TOKEN = re.compile(r"^<0x([0-9A-Fa-f]{2})>$")


def _byte_level_alphabet() -> dict[str, int]:
    """GPT-2's map from the printable stand-in characters back to the bytes they encode."""
    printable = (
        list(range(ord("!"), ord("~") + 1))
        + list(range(ord("¡"), ord("¬") + 1))
        + list(range(ord("®"), ord("ÿ") + 1))
    )
    chars = printable[:]
    n = 0
    for b in range(256):
        if b not in printable:
            printable.append(b)
            chars.append(256 + n)
            n += 1
    return {chr(c): b for b, c in zip(printable, chars)}


def _uses_byte_level(tokenizer: dict[str, Any]) -> bool:
    def mentions(node: Any) -> bool:
        if isinstance(node, dict):
            return node.get("type") == "ByteLevel" or any(mentions(v) for v in node.values())
        if isinstance(node, list):
            return any(mentions(v) for v in node)
        return False

    return mentions(tokenizer.get("decoder"))


def load_token_bytes(
    folder: str | Path, n_vocab: int, decode_one: Callable[[int], str]
) -> tuple[list[bytes], set[int]]:
    """One bytes entry per token id, and the ids of special tokens (which render as nothing).

    `decode_one` is the runtime's own decoder, used for ids the file does not explain.
    """
    path = Path(folder) / "tokenizer.json"
    tokenizer = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
    vocab: dict[str, int] = tokenizer.get("model", {}).get("vocab") or {}
    if isinstance(vocab, list):  # Unigram models list [piece, score] pairs
        vocab = {piece: i for i, (piece, _score) in enumerate(vocab)}
    added = tokenizer.get("added_tokens") or []
    size = max([n_vocab, *(i + 1 for i in vocab.values()), *(a["id"] + 1 for a in added)])
    table: list[bytes | None] = [None] * size
    specials = {a["id"] for a in added if a.get("special")}

    if _uses_byte_level(tokenizer):
        alphabet = _byte_level_alphabet()
        for piece, i in vocab.items():
            try:
                table[i] = bytes(alphabet[c] for c in piece)
            except KeyError:
                table[i] = piece.encode("utf-8")
    else:
        for piece, i in vocab.items():
            byte = _BYTE_TOKEN.match(piece)
            table[i] = bytes([int(byte.group(1), 16)]) if byte else piece.replace("▁", " ").encode()
    for a in added:
        table[a["id"]] = b"" if a.get("special") else a["content"].encode("utf-8")
    for i, entry in enumerate(table):
        if entry is None:
            table[i] = decode_one(i).encode("utf-8")
    return [p or b"" for p in table], specials
