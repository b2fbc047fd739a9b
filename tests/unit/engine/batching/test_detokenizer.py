"""Incremental detokenization never emits half a UTF-8 character."""

from localserve.engine.batching.detokenizer import IncrementalDetokenizer


def test_multibyte_character_split_across_pieces_is_emitted_whole() -> None:
    emoji = "🦙".encode()
    d = IncrementalDetokenizer()
    assert d.feed(emoji[:2]) == ""
    assert d.feed(emoji[2:] + b"!") == "🦙!"


def test_flush_drops_a_dangling_partial_character() -> None:
    d = IncrementalDetokenizer()
    assert d.feed(b"ok " + "é".encode()[:1]) == "ok "
    assert d.flush() == ""


def test_invalid_bytes_inside_the_text_are_still_replaced() -> None:
    d = IncrementalDetokenizer()
    assert d.feed(b"a\xffb") == "a\ufffdb"
