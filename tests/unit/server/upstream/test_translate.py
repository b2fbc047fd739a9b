"""Ollama's requests as Chat Completions (server/upstream/translate.py), and the answers back
(server/upstream/reply.py)."""

from __future__ import annotations

import pytest

from localserve.ground.errors import BadRequest
from localserve.server.chat.answer_parser import Parsed
from localserve.server.upstream import translate as t
from localserve.server.upstream.reply import Reply


def test_a_chat_with_options_format_and_tools() -> None:
    tools = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]
    body = {
        "model": "m",
        "messages": [{"role": "user", "content": "hi"}],
        "options": {"temperature": 0, "num_predict": 5, "top_k": 3, "stop": ["x"], "seed": 1},
        "format": {"type": "object"},
        "tools": tools,
        "keep_alive": "5m",
    }
    got = t.chat_request(body, "remote-id", "box", None)
    assert got == {
        "model": "remote-id",
        "messages": [{"role": "user", "content": "hi"}],
        "stream": True,
        "stream_options": {"include_usage": True},
        "temperature": 0,
        "max_tokens": 5,
        "top_k": 3,
        "stop": ["x"],
        "seed": 1,
        "response_format": {
            "type": "json_schema",
            "json_schema": {"name": "answer", "schema": {"type": "object"}},
        },
        "tools": tools,
    }
    plain = t.chat_request({**body, "stream": False, "format": "json"}, "r", "box", None)
    assert plain["response_format"] == {"type": "json_object"} and "stream_options" not in plain


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"options": {"num_gpu": 1}}, "num_gpu"),
        ({"options": {"mirostat": 2}}, "mirostat"),
        ({"options": {"repeat_penalty": 1.2}}, "repeat_penalty"),
        ({"think": True}, "think"),
        ({"options": {"num_ctx": 8192}}, "num_ctx"),
    ],
)
def test_what_has_no_openai_field_is_refused_naming_it(body: dict, field: str) -> None:
    body = {"messages": [{"role": "user", "content": "hi"}], **body}
    with pytest.raises(BadRequest, match=field) as exc:
        t.chat_request(body, "r", "box", 4096)
    assert exc.value.param == field


def test_num_ctx_within_the_upstreams_context_and_unset_caps_are_taken() -> None:
    body = {
        "messages": [{"role": "user", "content": "hi"}],
        "options": {"num_ctx": 2048, "num_predict": -1},
    }
    got = t.chat_request(body, "r", "box", 4096)
    assert "max_tokens" not in got and "num_ctx" not in got


def test_calls_and_their_answers_get_ids_that_match() -> None:
    msgs = [
        {"role": "user", "content": "weather?"},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {"function": {"name": "a", "arguments": {"x": 1}}},
                {"function": {"name": "b", "arguments": {}}},
            ],
        },
        {"role": "tool", "content": "B", "tool_name": "b"},
        {"role": "tool", "content": "A"},
    ]
    out = t.messages(msgs)
    calls = out[1]["tool_calls"]
    assert [c["function"]["arguments"] for c in calls] == ['{"x": 1}', "{}"]
    assert out[1]["content"] == ""
    assert out[2]["tool_call_id"] == calls[1]["id"]
    assert out[3]["tool_call_id"] == calls[0]["id"]


def test_a_generate_is_a_system_and_a_user_message() -> None:
    got = t.generate_request({"prompt": "p", "system": "s", "stream": False}, "r", "box", None)
    assert got["messages"] == [{"role": "system", "content": "s"}, {"role": "user", "content": "p"}]
    with pytest.raises(BadRequest, match="raw"):
        t.generate_request({"prompt": "p", "raw": True}, "r", "box", None)


def test_a_whole_answer_reads_its_calls_arguments_and_counts() -> None:
    completion = {
        "choices": [
            {
                "message": {
                    "content": None,
                    "tool_calls": [{"function": {"name": "f", "arguments": '{"city": "Paris"}'}}],
                },
                "finish_reason": "tool_calls",
            }
        ],
        "usage": {"prompt_tokens": 3, "completion_tokens": 4},
    }
    reply = Reply()
    answer = reply.whole_answer(completion)
    assert (answer.content, [(c.name, c.arguments) for c in answer.calls]) == (
        "",
        [("f", {"city": "Paris"})],
    )
    assert (reply.prompt_tokens, reply.completion_tokens) == (3, 4)


def test_a_stream_collects_calls_named_once_and_their_arguments() -> None:
    reply = Reply()

    def call(args: str) -> dict:
        fn = {"name": "f", "arguments": args}  # llama-cpp-python repeats the name
        return {"choices": [{"delta": {"tool_calls": [{"index": 0, "function": fn}]}}]}

    assert reply.chunk({"choices": [{"delta": {"content": "hi"}}]}) == Parsed("hi")
    assert reply.chunk(call('{"a"')) is None
    assert reply.chunk(call(": 1}")) is None
    reply.chunk({"choices": [{"delta": {}, "finish_reason": "length"}]})
    reply.chunk({"choices": [], "usage": {"prompt_tokens": 1, "completion_tokens": 2}})
    assert [(c.name, c.arguments) for c in reply.end().calls] == [("f", {"a": 1})]
    assert (reply.finish_reason, reply.completion_tokens) == ("length", 2)


def test_an_embed_request() -> None:
    got = t.embed_request({"input": "a", "dimensions": 8, "truncate": True}, "r", "box")
    assert got == {"model": "r", "input": ["a"], "encoding_format": "float", "dimensions": 8}
    with pytest.raises(BadRequest, match="input"):
        t.embed_request({"input": [1]}, "r", "box")
    with pytest.raises(BadRequest, match="num_gpu"):
        t.embed_request({"input": "a", "options": {"num_gpu": 1}}, "r", "box")
