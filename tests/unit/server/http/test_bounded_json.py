"""What server/http/bounded_json.py reads from a client, and how long it takes (#57): brackets
count only outside strings, escapes pair as in JSON, and a body of the 1 MiB limit is read in
one pass whatever it holds. The hostile bodies here took quadratic time before (64 KB of an
unterminated string of escaped quotes: 14 s), and the first of the mebibyte bodies below would
have taken about an hour."""

from __future__ import annotations

import json

import pytest

from localserve.server.http.bounded_json import MAX_DEPTH, MAX_INT_DIGITS, BadJSON, loads

MiB = 1 << 20
DEEP = "[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1)


def test_brackets_inside_strings_do_not_count_toward_the_depth() -> None:
    text = json.dumps({"p": DEEP * 3})
    assert loads(text) == {"p": DEEP * 3}


def test_brackets_outside_strings_past_the_depth_are_refused() -> None:
    with pytest.raises(BadJSON, match=f"deeper than {MAX_DEPTH} levels"):
        loads(DEEP)


# JSON string literals as a client writes them, escapes and brackets inside.
STRINGS = [
    r'"\""',
    r'"\\"',
    r'"\\\""',
    r'"\\\\"',
    r'"\"[[{"',
    r'"\u0022[[["',
    r'"]]}}"',
    '"\u2200\\\\"',
]


@pytest.mark.parametrize("literal", STRINGS)
def test_a_string_of_escapes_reads_back_and_only_the_brackets_around_it_count(
    literal: str,
) -> None:
    value = json.loads(literal)
    at_limit = "[" * (MAX_DEPTH - 1) + f"[{literal}]" + "]" * (MAX_DEPTH - 1)
    assert loads(f"[{literal}]") == [value]
    assert loads(at_limit) is not None
    with pytest.raises(BadJSON, match="deeper"):
        loads("[" + at_limit + "]")


def test_a_string_that_ends_in_an_escaped_backslash_ends_there() -> None:
    # `"a\\"` is a whole string: the brackets after it are outside and counted.
    with pytest.raises(BadJSON, match="deeper"):
        loads('["a\\\\", ' + DEEP + "]")


def test_an_unterminated_string_of_brackets_is_refused_for_its_depth_as_before() -> None:
    with pytest.raises(BadJSON, match="deeper"):
        loads('{"p": "' + "[" * (MAX_DEPTH + 1))


def test_a_utf16_body_is_counted_on_its_text() -> None:
    with pytest.raises(BadJSON, match="deeper"):
        loads(DEEP.encode("utf-16"))
    assert loads(json.dumps({"p": "\u2200" + DEEP}).encode("utf-16")) == {"p": "\u2200" + DEEP}


def test_a_long_integer_outside_a_string_is_refused_and_inside_one_is_text() -> None:
    digits = "9" * (MAX_INT_DIGITS + 1)
    with pytest.raises(BadJSON, match=f"integer of {MAX_INT_DIGITS + 1} digits"):
        loads(f'{{"seed": {digits}}}')
    assert loads(f'{{"p": "{digits}"}}') == {"p": digits}


def test_a_mebibyte_unterminated_string_of_escaped_quotes_is_refused_in_one_pass() -> None:
    with pytest.raises(BadJSON, match="Unterminated string"):
        loads(b'"' + b'\\"' * (MiB // 2))


def test_a_mebibyte_string_of_escaped_quotes_and_backslashes_reads_back() -> None:
    string = '"\\' * (MiB // 4)
    assert loads(json.dumps([string])) == [string]


def test_a_mebibyte_of_short_strings_reads_back() -> None:
    strings = ["[{"] * (MiB // 8)
    assert loads(json.dumps(strings)) == strings
