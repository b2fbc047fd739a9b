"""The work one request may ask for is bounded (issue #57): messages and their parts, embedding
inputs and their tokens, tools and the size of each, an answer format's size, stop strings and
`n`. Each bound is refused before any model work (the tokens: once they are counted, before
any is embedded), a 400 (413 for a size) in the face's own error format, naming the setting
where it is one (server/http/bounds.py) or the field (server/http/validation.py's
stop strings, server/wire/openai.py's `n`).

The app runs in this process with no model behind it, as in test_no_input_reaches_a_500.py:
a request that got past its bound would reach the fake model and fail with a 500.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from localserve.ground.settings import Settings
from localserve.server.http import bounds
from localserve.server.http.refused import Refused
from tests.support.helpers import assert_openai_error_shape
from tests.unit.server.http.test_no_input_reaches_a_500 import (
    ask,
    assert_anthropic_error_shape,
    assert_ollama_error_shape,
)

HI = {"role": "user", "content": "hi"}
PARTS = [{"type": "text", "text": "hi"}] * 3
OPENAI_TOOL = {"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}
ANTHROPIC_TOOL = {"name": "f", "input_schema": {"type": "object"}}
RESPONSES_TOOL = {"type": "function", "name": "f", "parameters": {"type": "object"}}
BIG_SCHEMA = {"type": "object", "description": "x" * (64 << 10)}  # just over 64 KiB as JSON


def post(path: str, body: dict[str, Any], **settings: Any) -> tuple[int, str, dict[str, Any]]:
    """(status, message, OpenAI's error object or {}) of one request, its error in the face's
    own shape."""
    status, answer = ask(path, json.dumps({"model": "fake", **body}).encode(), **settings)
    if path.startswith("/api/"):
        return status, assert_ollama_error_shape(answer), {}
    if path.startswith("/v1/messages"):
        return status, assert_anthropic_error_shape(answer)["message"], {}
    error = assert_openai_error_shape(answer)
    return status, error["message"], error


def assert_refused(got: tuple[int, str, dict[str, Any]], status: int, setting: str) -> str:
    code, message, error = got
    assert code == status, got
    assert f"({setting})" in message, got
    if error:  # OpenAI's shape names the setting in its code too
        assert error["code"] == setting, got
    return message


# -- messages and their parts ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/v1/chat/completions", {"messages": [HI] * 3}),
        ("/api/chat", {"messages": [HI] * 3}),
        ("/v1/messages", {"max_tokens": 8, "messages": [HI] * 3}),
        ("/v1/messages/count_tokens", {"messages": [HI] * 3}),
        ("/v1/responses", {"input": [HI] * 3}),
    ],
)
def test_more_messages_than_max_messages_is_a_400_naming_it(path: str, body: Any) -> None:
    message = assert_refused(post(path, body, max_messages=2), 400, "max_messages")
    assert "holds 3" in message and "at most 2" in message


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/v1/chat/completions", {"messages": [{"role": "user", "content": PARTS}]}),
        ("/api/chat", {"messages": [{"role": "user", "content": PARTS}]}),
        ("/v1/messages", {"max_tokens": 8, "messages": [{"role": "user", "content": PARTS}]}),
        ("/v1/messages", {"max_tokens": 8, "messages": [HI], "system": PARTS}),
        ("/v1/responses", {"input": [{"role": "user", "content": PARTS}]}),
    ],
    ids=["openai", "ollama", "anthropic", "anthropic-system", "responses"],
)
def test_more_parts_in_a_message_than_max_message_parts_is_a_400_naming_it(
    path: str, body: Any
) -> None:
    assert_refused(post(path, body, max_message_parts=2), 400, "max_message_parts")


# -- embeddings --------------------------------------------------------------------------------


@pytest.mark.parametrize("path", ["/v1/embeddings", "/api/embed"])
def test_more_than_2048_embedding_inputs_is_a_400_naming_max_embedding_inputs(path: str) -> None:
    got = post(path, {"input": ["a"] * 2049})
    assert "holds 2049 inputs" in assert_refused(got, 400, "max_embedding_inputs")


def test_one_list_of_token_ids_is_one_embedding_input() -> None:
    bounds.check("/v1/embeddings", {"input": list(range(3000))}, Settings())


def test_lists_of_token_ids_are_one_embedding_input_each() -> None:
    with pytest.raises(Refused, match="holds 3 inputs"):
        bounds.check("/v1/embeddings", {"input": [[1], [2], [3]]}, Settings(max_embedding_inputs=2))


def test_more_embedding_tokens_than_max_embedding_tokens_is_refused_naming_it() -> None:
    with pytest.raises(Refused, match=r"holds 6 tokens; at most 5 .*\(max_embedding_tokens\)"):
        bounds.embedding_tokens([[1, 2, 3], [4, 5, 6]], Settings(max_embedding_tokens=5))


def test_embedding_tokens_at_their_bound_are_taken() -> None:
    bounds.embedding_tokens([[1, 2], [3, 4, 5]], Settings(max_embedding_tokens=5))


# -- tools and schemas -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/v1/chat/completions", {"messages": [HI], "tools": [OPENAI_TOOL] * 2}),
        ("/api/chat", {"messages": [HI], "tools": [OPENAI_TOOL] * 2}),
        ("/v1/messages", {"max_tokens": 8, "messages": [HI], "tools": [ANTHROPIC_TOOL] * 2}),
        ("/v1/responses", {"input": "hi", "tools": [RESPONSES_TOOL] * 2}),
    ],
)
def test_more_tools_than_max_tools_is_a_400_naming_it(path: str, body: Any) -> None:
    assert_refused(post(path, body, max_tools=1), 400, "max_tools")


def test_each_tool_of_a_namespace_counts_as_a_tool() -> None:
    namespace = {"type": "namespace", "name": "mcp", "tools": [RESPONSES_TOOL] * 2}
    with pytest.raises(Refused, match="max_tools"):
        bounds.check("/v1/responses", {"tools": [namespace]}, Settings(max_tools=1))


@pytest.mark.parametrize(
    ("path", "body"),
    [
        (
            "/v1/chat/completions",
            {"messages": [HI], "tools": [{"type": "function", "function": BIG_SCHEMA}]},
        ),
        ("/api/chat", {"messages": [HI], "tools": [{"type": "function", "function": BIG_SCHEMA}]}),
        (
            "/v1/messages",
            {
                "max_tokens": 8,
                "messages": [HI],
                "tools": [{"name": "f", "input_schema": BIG_SCHEMA}],
            },
        ),
        ("/v1/responses", {"input": "hi", "tools": [{**RESPONSES_TOOL, "parameters": BIG_SCHEMA}]}),
    ],
)
def test_a_tool_larger_than_max_schema_bytes_is_a_413_naming_it(path: str, body: Any) -> None:
    message = assert_refused(post(path, body), 413, "max_schema_bytes")
    assert message.startswith("tools[0] is") and "at most 64.0 KiB" in message


def test_anthropic_calls_a_tool_too_large_a_request_too_large() -> None:
    body = {"max_tokens": 8, "messages": [HI], "tools": [{"name": "f", "input_schema": BIG_SCHEMA}]}
    status, answer = ask("/v1/messages", json.dumps({"model": "fake", **body}).encode())
    assert status == 413 and assert_anthropic_error_shape(answer)["type"] == "request_too_large"


@pytest.mark.parametrize(
    ("path", "body"),
    [
        (
            "/v1/chat/completions",
            {
                "messages": [HI],
                "response_format": {"type": "json_schema", "json_schema": {"schema": BIG_SCHEMA}},
            },
        ),
        ("/api/chat", {"messages": [HI], "format": BIG_SCHEMA}),
        ("/api/generate", {"prompt": "hi", "format": BIG_SCHEMA}),
        (
            "/v1/responses",
            {"input": "hi", "text": {"format": {"type": "json_schema", **BIG_SCHEMA}}},
        ),
        (
            "/v1/messages",
            {
                "max_tokens": 8,
                "messages": [HI],
                "output_config": {"format": {"type": "json_schema", "schema": BIG_SCHEMA}},
            },
        ),
    ],
)
def test_an_answer_format_larger_than_max_schema_bytes_is_a_413_naming_it(
    path: str, body: Any
) -> None:
    assert_refused(post(path, body), 413, "max_schema_bytes")


# -- stop strings and n: bounded where they are read -------------------------------------------


@pytest.mark.parametrize(
    ("path", "body", "field"),
    [
        ("/v1/chat/completions", {"messages": [HI], "stop": ["s"] * 65}, "stop"),
        ("/v1/completions", {"prompt": "hi", "stop": ["s"] * 65}, "stop"),
        ("/api/generate", {"prompt": "hi", "options": {"stop": ["s"] * 65}}, None),
        ("/v1/messages", {"max_tokens": 8, "messages": [HI], "stop_sequences": ["s"] * 65}, None),
    ],
)
def test_more_than_64_stop_strings_is_a_400(path: str, body: Any, field: str | None) -> None:
    status, message, error = post(path, body)
    assert status == 400 and "has 65 strings; at most 64 are taken" in message
    assert error.get("param") == field  # OpenAI's shape names it; Ollama's and Anthropic's cannot


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/v1/chat/completions", {"messages": [HI], "stop": "s" * 257}),
        ("/api/chat", {"messages": [HI], "options": {"stop": ["s" * 257]}}),
        ("/v1/messages", {"max_tokens": 8, "messages": [HI], "stop_sequences": ["s" * 257]}),
    ],
)
def test_a_stop_string_longer_than_256_characters_is_a_400(path: str, body: Any) -> None:
    status, message, _ = post(path, body)
    assert status == 400 and "longer than 256 characters" in message


@pytest.mark.parametrize(
    ("path", "body"),
    [("/v1/chat/completions", {"messages": [HI]}), ("/v1/completions", {"prompt": "hi"})],
)
def test_an_n_other_than_1_is_a_400_naming_n(path: str, body: Any) -> None:
    status, message, error = post(path, {**body, "n": 2})
    assert status == 400 and error["param"] == "n" and "'n' must be between 1 and 1" in message


# -- the bounds themselves ---------------------------------------------------------------------


def test_lists_at_their_bounds_are_taken() -> None:
    settings = Settings(max_messages=2, max_message_parts=3, max_tools=2)
    body = {"messages": [{"role": "user", "content": PARTS}] * 2, "tools": [OPENAI_TOOL] * 2}
    bounds.check("/v1/chat/completions", body, settings)
    bounds.check("/v1/embeddings", {"input": ["a"] * 2048}, Settings())


def test_a_field_of_the_wrong_type_is_left_to_the_face_to_name() -> None:
    bounds.check("/v1/chat/completions", {"messages": 7, "tools": "x", "system": 1}, Settings())


def test_the_defaults_are_far_above_what_a_client_sends() -> None:
    s = Settings()
    assert (s.max_messages, s.max_message_parts, s.max_tools) == (10_000, 1_000, 512)
    assert (s.max_embedding_inputs, s.max_schema_bytes) == (2048, 64 << 10)  # OpenAI's 2,048
    assert s.max_embedding_tokens == 300_000  # OpenAI's own per-request cap
    assert s.compile_timeout == 5.0  # Claude Code's tools compile in milliseconds
