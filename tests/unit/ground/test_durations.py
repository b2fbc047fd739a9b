"""Durations as keep_alive takes them (ground/units.py's parse_keep_alive), read in time linear
in the text and never longer than MAX_DURATION_CHARS (#57): a run of 32,000 digits and an "x"
once took 24 s, holding the event loop, since the parts were searched for at every digit.
tests/unit/engine/residency/test_pools_and_keep_alive.py has the everyday forms."""

from __future__ import annotations

import pytest

from localserve.ground.errors import BadRequest
from localserve.ground.units import MAX_DURATION_CHARS, parse_keep_alive


@pytest.mark.parametrize(
    "text, seconds",
    [
        ("100ms", 0.1),
        ("1.5h", 5400.0),
        ("1m1ms", 60.001),
        ("2h0m30s", 7230.0),
        (" 5M ", 300.0),
        ("1e3", 1000.0),
        ("0.5", 0.5),
    ],
)
def test_parts_one_after_another_and_plain_numbers_are_durations(text: str, seconds: float) -> None:
    assert parse_keep_alive(text) == seconds


@pytest.mark.parametrize("text", ["", "m", "5 m", "1.5.5s", "5mx", "x5m", "5d", "1h-", "-"])
def test_anything_but_parts_one_after_another_is_a_bad_request(text: str) -> None:
    with pytest.raises(BadRequest, match="must be a duration"):
        parse_keep_alive(text)


def test_a_duration_as_long_as_the_bound_is_read() -> None:
    text = "0" * (MAX_DURATION_CHARS - 1) + "m"
    assert parse_keep_alive(text) == 0.0


def test_a_duration_past_the_bound_is_a_bad_request_that_names_it() -> None:
    with pytest.raises(BadRequest, match=f"at most {MAX_DURATION_CHARS} characters"):
        parse_keep_alive("0" * MAX_DURATION_CHARS + "m")


def test_the_bound_counts_the_text_without_the_spaces_around_it() -> None:
    assert parse_keep_alive(" " * 1000 + "5m" + " " * 1000) == 300.0


def test_32000_digits_and_an_x_are_refused_by_their_length() -> None:
    with pytest.raises(BadRequest, match="at most"):
        parse_keep_alive("1" * 32_000 + "x")


def test_digits_up_to_the_bound_and_an_x_are_refused_as_no_duration() -> None:
    with pytest.raises(BadRequest, match="must be a duration"):
        parse_keep_alive("1" * (MAX_DURATION_CHARS - 1) + "x")
