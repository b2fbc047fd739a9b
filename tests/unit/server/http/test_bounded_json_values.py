"""How many values (arrays, objects and the items in them) server/http/bounded_json.py lets the
decoder build, and how it finds the depth without a Python loop a bracket (#57): 16 MiB of `[],`
held the event loop for 7 s, 1.5 s of it counting brackets one by one and the rest building 5.6
million lists; 16 MiB of token ids held it for 0.4 s building 8.4 million ints."""

from __future__ import annotations

import asyncio
import gc
import json
from dataclasses import replace
from types import SimpleNamespace
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer

from localserve.ground.settings import Settings
from localserve.server.app import build_app
from localserve.server.http import bounded_json
from localserve.server.http.bounded_json import MAX_DEPTH, BadJSON, TooManyValues, loads
from tests.support.helpers import assert_openai_error_shape

DEEP = "[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1)


def wide(count: int) -> str:
    """One array of count - 1 empty arrays and objects: `count` containers and count - 2 commas
    (2 * count - 2 values), depth 2."""
    return "[" + ",".join(["[]", "{}"] * ((count - 1) // 2) + ["[]"] * ((count - 1) % 2)) + "]"


def test_more_values_than_the_bound_are_refused_naming_the_setting() -> None:
    with pytest.raises(TooManyValues, match=r"holds 20 .*at most 19 .*\(max_json_values\)"):
        loads(wide(11), max_values=19)


def test_a_text_of_exactly_the_bound_reads_back() -> None:
    assert len(loads(wide(10), max_values=18)) == 9


def test_the_items_of_an_array_of_numbers_count_toward_the_bound() -> None:
    # A prompt of token ids: one array, but a Python int for each item.
    ids = json.dumps({"prompt": list(range(100))})
    with pytest.raises(TooManyValues, match="holds 101 "):
        loads(ids, max_values=100)


def test_brackets_and_commas_inside_strings_do_not_count_toward_the_bound() -> None:
    text = json.dumps({"code": "[{}]," * 1000})
    assert loads(text, max_values=1) == {"code": "[{}]," * 1000}


def test_the_bound_is_met_before_the_parse() -> None:
    # Cut short, so a parse would say so: the count speaks first.
    with pytest.raises(TooManyValues):
        loads(wide(100)[:-1], max_values=10)


def test_a_refusal_for_its_values_is_a_bad_json_for_callers_that_catch_only_that() -> None:
    with pytest.raises(BadJSON):
        loads(wide(11), max_values=10)


def test_without_a_bound_any_number_of_containers_reads_back() -> None:
    assert len(loads(wide(10_001))) == 10_000


def test_the_default_bound_is_far_above_a_long_agent_conversation() -> None:
    # 10,000 messages of two text parts each and 512 tools of a few properties each.
    message = {"role": "user", "content": [{"type": "text", "text": "x"}] * 2}
    schema = {"type": "object", "properties": {f"p{i}": {"type": "string"} for i in range(8)}}
    tool = {"type": "function", "function": {"name": "t", "parameters": schema}}
    body = json.dumps({"messages": [message] * 10_000, "tools": [tool] * 512})
    assert loads(body, Settings().max_json_values)["messages"][0] == message


def test_depth_carries_from_one_chunk_of_brackets_to_the_next() -> None:
    # The first chunk's brackets leave the depth at 1; the deep part is all in the second.
    pairs = "[]," * (bounded_json._CHUNK // 2)

    def nest(depth: int) -> str:  # inside the outer array: one level more
        return "[" + pairs + "[" * (depth - 1) + "]" * (depth - 1) + "]"

    with pytest.raises(BadJSON, match="deeper"):
        loads(nest(MAX_DEPTH + 1))
    assert loads(nest(MAX_DEPTH))[-1] is not None


def test_a_text_of_fewer_containers_than_the_depth_bound_is_never_summed(monkeypatch) -> None:
    def summed(*_: object) -> bool:
        raise AssertionError("summed")

    monkeypatch.setattr(bounded_json, "_deeper", summed)
    assert loads("[" * MAX_DEPTH + "]" * MAX_DEPTH) is not None


def test_the_collector_is_on_again_after_a_parse_and_after_a_refusal() -> None:
    assert gc.isenabled()
    loads(wide(1000))
    with pytest.raises(BadJSON):
        loads("[1,")
    assert gc.isenabled()


def test_a_collector_found_off_is_left_off() -> None:
    gc.disable()
    try:
        loads(wide(1000))
        assert not gc.isenabled()
    finally:
        gc.enable()


# -- on the wire: the request's reader -----------------------------------------------------------


def post(path: str, body: bytes, **settings: Any) -> tuple[int, Any]:
    """One request to an app with no model behind it: the refusal comes before any is asked."""

    async def go() -> tuple[int, Any]:
        manager = SimpleNamespace(settings=replace(Settings(), **settings))
        async with TestClient(TestServer(build_app(manager))) as client:  # type: ignore[arg-type]
            async with client.post(path, data=body) as r:
                return r.status, await r.json(content_type=None)

    return asyncio.run(go())


def test_a_body_of_too_many_values_is_a_413_naming_the_setting_in_openais_shape() -> None:
    body = json.dumps({"model": "m", "messages": [], "x": [[]] * 20}).encode()
    status, answer = post("/v1/chat/completions", body, max_json_values=10)
    assert status == 413, answer
    error = assert_openai_error_shape(answer)
    assert error["code"] == "max_json_values"
    assert error["message"].startswith("the request body holds 44 JSON values")


def test_a_body_of_too_many_values_is_a_413_in_ollamas_shape() -> None:
    body = json.dumps({"model": "m", "prompt": "hi", "x": [{}] * 20}).encode()
    status, answer = post("/api/generate", body, max_json_values=10)
    assert status == 413 and set(answer) == {"error"}, answer
    assert "(max_json_values)" in answer["error"]


# -- strings dense in quotes: numpy's pass, not the split ------------------------------------------

LONG = '"' + "[{" * bounded_json._CHUNK + '"'  # a string of brackets across chunks
TEXTS = [
    '["a", "[", "{", [1, 2], {"k": "]"}]',
    json.dumps(["[{"] * 1000 + [[[]]]),
    "[" + LONG + ', "x", [[]], "y"]',
    '["a", "b", "unterminated [[[',
    r'["\"[", "\\", "\\\"{", []]',
]


@pytest.mark.parametrize("text", TEXTS, ids=range(len(TEXTS)))
def test_numpys_pass_leaves_the_brackets_and_digits_the_split_leaves(
    text: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    utf8 = text.encode()
    monkeypatch.setattr(bounded_json, "_DENSE_QUOTES", 1 << 40)  # every text split
    split = bounded_json._outside_strings(utf8)
    monkeypatch.setattr(bounded_json, "_DENSE_QUOTES", 0)  # every text through numpy
    blanked = bounded_json._outside_strings(utf8)
    assert blanked.replace(b" ", b"") == split.replace(b" ", b"")


def test_numpys_pass_refuses_an_unterminated_string_of_brackets_for_its_depth(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(bounded_json, "_DENSE_QUOTES", 0)
    with pytest.raises(BadJSON, match="deeper"):
        loads('["a", "b", "' + "[" * (MAX_DEPTH + 1))


def test_sixteen_mebibytes_of_short_strings_read_back() -> None:
    strings = ["a"] * ((16 << 20) // 5)
    assert loads(json.dumps(strings)) == strings


# -- a large body: checked in the child process, parsed on a thread -------------------------------

LARGE = 2 << 20  # past readers.py's _IN_A_CHILD


def test_a_large_body_of_too_many_values_is_refused_from_the_child_as_on_the_loop() -> None:
    body = json.dumps({"model": "m", "messages": [], "x": [1] * (LARGE // 2)}).encode()
    status, answer = post("/v1/chat/completions", body, max_json_values=1000)
    assert status == 413, answer
    assert assert_openai_error_shape(answer)["code"] == "max_json_values"


def test_a_large_body_of_bad_json_is_a_400_from_the_child() -> None:
    body = b'{"model": "m", "messages": [], "x": "' + b'\\"' * LARGE
    status, answer = post("/api/chat", body)
    assert status == 400 and "is not valid JSON" in answer["error"], answer


def test_a_large_body_over_a_bound_of_its_face_is_refused_naming_it() -> None:
    body = json.dumps({"model": "m", "messages": [{"role": "user", "content": "x" * LARGE}] * 3})
    status, answer = post("/v1/chat/completions", body.encode(), max_messages=2)
    assert status == 400 and "(max_messages)" in answer["error"]["message"], answer
