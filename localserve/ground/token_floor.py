"""The fewest tokens a text can be, known without tokenizing it (issue #57): a prompt far past a
slot's context is refused at once, where tokenizing 16 MiB held a worker for seconds.

Every token llama.cpp's tokenizer emits stands for a stretch of the text no longer than the
longest token text of the vocabulary (`longest`, llama.cpp's own `max_token_len`), so a text of
B bytes is at least ceil(B / longest) tokens. Why, and where it does not hold:

- A special token written in the text (the worker tokenizes with parse_special) matches its own
  text: at most `longest` bytes. Control and user-defined tokens count among the longest, not
  only the normal ones, for that reason.
- SPM ("llama") and BPE ("gpt2", "gemma4") match vocabulary texts against an encoding of the
  text that never shrinks it: GPT-2's byte-level characters take 1 or 2 bytes a byte, escaped
  whitespace ("▁") 3 bytes a space. A stretch no token matches goes out a token per byte (the
  byte-fallback tokens), except that BPE drops a byte the vocabulary has no such token for
  (SmolLM2 has none for 0x04 and seven more): those bytes are not counted (`uncounted`).
- RWKV matches the longest token on the raw bytes, and an unmatched byte is one unknown token.
- A special token marked lstrip or rstrip (Phi-3's, some BERTs' mask) swallows the whitespace
  beside it: with one in the vocabulary, whitespace is not counted either.
- No floor where text may vanish or one token stand for any length: WPM (BERT normalizes, and
  an unknown word is one [UNK]), UGM (T5 normalizes and collapses whitespace), PLaMo-2, and
  BPE's "whitespace" and "hybriddna" tokenizers (neither is checked here).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from localserve.ground.errors import ContextOverflow

# What C's isspace() is in llama.cpp's "C" locale: the whitespace an lstrip/rstrip token eats.
C_SPACE = b" \t\n\v\f\r"
# GGUF tokenizer models (tokenizer.ggml.model) whose tokenizing the module docstring bounds.
FLOORED_MODELS = frozenset({"llama", "gpt2", "gemma4", "rwkv"})
BPE_MODELS = frozenset({"gpt2", "gemma4"})
# Pre-tokenizers (tokenizer.ggml.pre) of a BPE that reads raw UTF-8, its byte tokens `<0xXX>`,
# not GPT-2's byte-level characters (llama.cpp's byte_encode = false).
RAW_UTF8_PRES = frozenset({"gemma4", "granite-embed-multi-311m", "sarvam-moe"})
NO_FLOOR_PRES = frozenset({"whitespace"})
ESCAPED_SPACE = "\u2581".encode()


@dataclass(frozen=True)
class TokenFloor:
    """A vocabulary's floor: `longest` bytes at most a token, and the bytes (`uncounted`) that
    may stand for no token at all."""

    longest: int
    uncounted: tuple[int, ...] = ()

    def tokens(self, text: str) -> int:
        """The fewest tokens `text` can be (the BOS and EOS a tokenizer adds not counted)."""
        data = text.encode("utf-8", "surrogatepass")
        n = len(data.translate(None, bytes(self.uncounted))) if self.uncounted else len(data)
        return -(-n // self.longest)

    def check(self, text: str, context: int, reserve: int, field: str = "prompt") -> None:
        """ContextOverflow, before any tokenizing, for a text that leaves no room in a slot of
        `context` tokens for `reserve` more (a generation's first new token)."""
        # Four bytes a character at most: a text this short is never refused, and is not read.
        if 4 * len(text) <= self.longest * (context - reserve):
            return
        if (n := self.tokens(text)) + reserve > context:
            raise ContextOverflow(n, context, field, at_least=True)


def check_fits(
    floor: TokenFloor | None, text: str, context: int, reserve: int, field: str = "prompt"
) -> None:
    """TokenFloor.check where the model's tokenizer has a floor; nothing where it has none."""
    if floor is not None:
        floor.check(text, context, reserve, field)


def gpt2_byte_chars() -> list[bytes]:
    """GPT-2's byte-level alphabet, by byte: the character (UTF-8) its BPE reads each byte as."""
    printable = [*range(0x21, 0x7F), *range(0xA1, 0xAD), *range(0xAE, 0x100)]
    chars: dict[int, int] = {b: b for b in printable}
    shifted = (b for b in range(256) if b not in chars)
    chars.update((b, 256 + i) for i, b in enumerate(shifted))
    return [chr(chars[b]).encode("utf-8") for b in range(256)]


def byte_tokens(raw_utf8: bool) -> list[bytes]:
    """The text of each byte's fallback token, by byte, as BPE looks it up."""
    if raw_utf8:
        return [f"<0x{b:02X}>".encode() for b in range(256)]
    return gpt2_byte_chars()


def vocabulary_floor(
    tokenizer_model: str, pre: str, texts: Iterable[bytes], strips_space: bool
) -> TokenFloor | None:
    """The floor of a vocabulary: its tokenizer model and pre-tokenizer (GGUF's
    tokenizer.ggml.model and .pre), every token's text as the vocabulary holds it, and whether
    a special token strips whitespace; None where no floor holds (the module docstring)."""
    if tokenizer_model not in FLOORED_MODELS or pre in NO_FLOOR_PRES:
        return None
    kept = set(texts)
    longest = max(map(len, kept), default=0)
    if longest <= 0:
        return None
    uncounted = set(C_SPACE) if strips_space else set()
    if tokenizer_model in BPE_MODELS:
        raw = tokenizer_model == "gemma4" or pre in RAW_UTF8_PRES
        uncounted |= {b for b, text in enumerate(byte_tokens(raw)) if text not in kept}
        # These escape a space as "▁" before they look anything up: a space is gone with it.
        if raw and uncounted & set(ESCAPED_SPACE):
            uncounted.add(ord(" "))
    return TokenFloor(longest, tuple(sorted(uncounted)))
