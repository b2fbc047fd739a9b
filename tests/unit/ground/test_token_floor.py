"""The fewest tokens a text can be, known without tokenizing it (ground/token_floor.py, issue
#57): which vocabularies have such a floor, what it counts, and the refusal it makes, in the
context-length 400's own words. llama.cpp's tokenizer against it: tests/unit/backends/
test_token_floor_vocab.py."""

from __future__ import annotations

import pytest

from localserve.ground.errors import ContextOverflow
from localserve.ground.token_floor import (
    C_SPACE,
    TokenFloor,
    check_fits,
    gpt2_byte_chars,
    vocabulary_floor,
)

GPT2 = gpt2_byte_chars()
HEX = [f"<0x{b:02X}>".encode() for b in range(256)]


def test_gpt2s_byte_alphabet_is_one_character_a_byte_printables_as_themselves() -> None:
    assert len(set(GPT2)) == 256
    assert GPT2[ord("a")] == b"a" and GPT2[ord("~")] == b"~"
    assert GPT2[ord(" ")] == "Ġ".encode() and GPT2[ord("\n")] == "Ċ".encode()


def test_the_floor_is_the_bytes_over_the_longest_token_rounded_up() -> None:
    floor = TokenFloor(4)
    assert [floor.tokens("x" * n) for n in (0, 1, 4, 5, 8, 9)] == [0, 1, 1, 2, 2, 3]
    assert floor.tokens("é" * 4) == 2  # UTF-8 bytes, not characters


def test_bytes_that_may_vanish_are_not_counted() -> None:
    floor = TokenFloor(1, uncounted=tuple(C_SPACE) + (4,))
    assert floor.tokens(" \t\n\v\f\r\x04ab") == 2


def test_the_longest_token_counts_special_ones_too() -> None:
    # With parse_special, "<|im_start|>" in a text is one token of 12 bytes.
    texts = [*GPT2, b"ab", b"<|im_start|>"]
    assert vocabulary_floor("gpt2", "smollm", texts, False) == TokenFloor(12)


def test_a_byte_level_bpe_counts_no_byte_it_has_no_token_for() -> None:
    texts = [t for b, t in enumerate(GPT2) if b not in (4, 0xF1)]
    assert vocabulary_floor("gpt2", "smollm", texts, False) == TokenFloor(2, (4, 0xF1))


def test_a_raw_utf8_bpe_falls_back_to_hex_byte_tokens() -> None:
    texts = [*HEX[:0x41], *HEX[0x42:], "▁".encode()]
    assert vocabulary_floor("gemma4", "gemma4", texts, False) == TokenFloor(6, (0x41,))
    # Without a token for a byte of its escaped space, a space may vanish with it.
    floor = vocabulary_floor("gpt2", "sarvam-moe", [*HEX[:0x96], *HEX[0x97:]], False)
    assert floor == TokenFloor(6, (ord(" "), 0x96))


def test_a_special_token_that_strips_whitespace_makes_whitespace_uncounted() -> None:
    floor = vocabulary_floor("llama", "default", [b"<s>", "▁the".encode()], True)
    assert floor == TokenFloor(6, tuple(sorted(C_SPACE)))


@pytest.mark.parametrize(
    ("model", "pre"),
    [("bert", ""), ("t5", ""), ("plamo2", ""), ("hybriddna", ""), ("gpt2", "whitespace")],
)
def test_tokenizers_that_normalize_or_drop_text_have_no_floor(model: str, pre: str) -> None:
    assert vocabulary_floor(model, pre, [*GPT2, *HEX], False) is None


def test_a_text_past_the_context_by_its_floor_is_refused_as_the_context_400() -> None:
    floor = TokenFloor(4)
    with pytest.raises(ContextOverflow) as err:
        floor.check("x" * 400, 100, 1, "messages")
    assert err.value.param == "messages" and err.value.prompt_tokens == 100
    assert str(err.value).startswith("the prompt has at least 100 tokens, but this model's")
    floor.check("x" * 396, 100, 1)  # 99 tokens and the first new one: it may fit


def test_no_floor_refuses_nothing() -> None:
    check_fits(None, "x" * 10_000, 10, 1)
