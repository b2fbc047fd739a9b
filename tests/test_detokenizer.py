"""Incremental detokenization never emits half a UTF-8 character."""

from localserve.engine.detokenizer import IncrementalDetokenizer


def test_multibyte_character_split_across_pieces_is_emitted_whole() -> None:
    emoji = "🦙".encode()
    d = IncrementalDetokenizer()
    assert d.feed(emoji[:2]) == ""
    assert d.feed(emoji[2:] + b"!") == "🦙!"


def test_flush_replaces_a_dangling_partial_character() -> None:
    d = IncrementalDetokenizer()
    d.feed("é".encode()[:1])
    assert d.flush() == "\ufffd"
