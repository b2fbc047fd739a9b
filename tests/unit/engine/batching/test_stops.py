"""Stop strings are pure logic: they are specified here without a model."""

from localserve.engine.batching.stops import StopMatcher


def test_text_without_stops_passes_through() -> None:
    assert StopMatcher(()).feed("hello") == ("hello", False)


def test_stop_inside_one_piece_cuts_before_it() -> None:
    assert StopMatcher(("END",)).feed("abcENDxyz") == ("abc", True)


def test_stop_spanning_pieces_is_held_then_matched() -> None:
    m = StopMatcher(("\nUser:",))
    assert m.feed("hi\nUs") == ("hi", False)
    assert m.feed("er: more") == ("", True)


def test_held_prefix_is_released_when_it_stops_matching() -> None:
    m = StopMatcher(("STOP",))
    assert m.feed("ST") == ("", False)
    assert m.feed("AY") == ("STAY", False)


def test_flush_releases_held_text() -> None:
    m = StopMatcher(("STOP",))
    m.feed("abcSTO")
    assert m.flush() == "STO"


def test_earliest_of_several_stops_wins() -> None:
    assert StopMatcher(("b", "a")).feed("xxaxb") == ("xx", True)
