"""Anthropic's Messages and OpenAI's Responses requests as Chat Completions, and the answers
back as the faces' parsed pieces (server/upstream/agent_translate.py)."""

from __future__ import annotations

import json

import pytest

from localserve.ground.errors import BadRequest
from localserve.server.anthropic.request import read_request as read_messages
from localserve.server.chat.answer_blocks import AnswerBlocks
from localserve.server.chat.answer_parser import Parsed
from localserve.server.responses.request import read_request as read_responses
from localserve.server.upstream import agent_translate as t
from localserve.server.upstream import reply as r
from localserve.server.upstream.agents import refusal

SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}


PARIS_CALL = {
    "type": "tool_use",
    "id": "toolu_1",
    "name": "get_weather",
    "input": {"city": "Paris"},
}


def sent_call(call_id: str) -> dict:
    """An assistant turn that called get_weather for Paris, as Chat Completions takes it (its
    thinking, if it had any, not sent back)."""
    function = {"name": "get_weather", "arguments": '{"city": "Paris"}'}
    return {
        "role": "assistant",
        "content": "",
        "tool_calls": [{"id": call_id, "type": "function", "function": function}],
    }


def test_a_message_with_system_tools_a_call_and_its_result() -> None:
    body = {
        "model": "m",
        "max_tokens": 64,
        "system": [{"type": "text", "text": "Be brief."}],
        "temperature": 0.2,
        "top_k": 5,
        "stop_sequences": ["END"],
        "metadata": {"user_id": "u"},
        "tools": [{"name": "get_weather", "description": "w", "input_schema": SCHEMA}],
        "tool_choice": {"type": "tool", "name": "get_weather", "disable_parallel_tool_use": True},
        "messages": [
            {"role": "user", "content": "Weather in Paris?"},
            {
                "role": "assistant",
                "content": [
                    {"type": "thinking", "thinking": "Call it.", "signature": ""},
                    PARIS_CALL,
                ],
            },
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": "toolu_1", "content": "Sunny"},
                    {"type": "text", "text": "And so?"},
                ],
            },
        ],
    }
    got = t.anthropic_request(body, read_messages(body).ask, "remote", "box", True)
    assert got == {
        "model": "remote",
        "stream": True,
        "stream_options": {"include_usage": True},
        "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Weather in Paris?"},
            sent_call("toolu_1"),
            {"role": "tool", "tool_call_id": "toolu_1", "content": "Sunny"},
            {"role": "user", "content": "And so?"},
        ],
        "max_tokens": 64,
        "temperature": 0.2,
        "top_k": 5,
        "stop": ["END"],
        "tools": [
            {
                "type": "function",
                "function": {"name": "get_weather", "description": "w", "parameters": SCHEMA},
            }
        ],
        "tool_choice": {"type": "function", "function": {"name": "get_weather"}},
        "parallel_tool_calls": False,
    }


def test_a_message_without_sampling_fields_sends_none_and_a_format_is_a_json_schema() -> None:
    body = {
        "model": "m",
        "max_tokens": 8,
        "messages": [{"role": "user", "content": "hi"}],
        "output_config": {"format": {"type": "json_schema", "schema": SCHEMA}},
        "tool_choice": {"type": "any"},
        "tools": [{"name": "f", "input_schema": {"type": "object"}}],
    }
    got = t.anthropic_request(body, read_messages(body).ask, "r", "box", False)
    assert "temperature" not in got and "top_p" not in got and "stream_options" not in got
    assert got["tool_choice"] == "required" and "parallel_tool_calls" not in got
    assert got["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "answer", "schema": SCHEMA},
    }
    none = {**body, "tool_choice": {"type": "none"}}
    assert "tools" not in t.anthropic_request(none, read_messages(none).ask, "r", "box", False)


def test_thinking_with_a_budget_is_refused_naming_it_and_adaptive_passes() -> None:
    body = {
        "model": "m",
        "max_tokens": 64,
        "messages": [{"role": "user", "content": "hi"}],
        "thinking": {"type": "enabled", "budget_tokens": 32},
    }
    with pytest.raises(BadRequest, match="'thinking'.*upstream 'box'") as exc:
        t.anthropic_request(body, read_messages(body).ask, "r", "box", False)
    assert exc.value.param == "thinking"
    adaptive = {**body, "thinking": {"type": "adaptive"}}
    assert t.anthropic_request(adaptive, read_messages(adaptive).ask, "r", "box", False)


def test_counting_asks_for_one_token() -> None:
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
    got = t.counting_request(body, read_messages(body, counting=True).ask, "r", "box")
    assert got["max_tokens"] == 1 and got["stream"] is False


def test_a_response_with_instructions_items_tools_and_format() -> None:
    body = {
        "model": "m",
        "instructions": "Be brief.",
        "max_output_tokens": 32,
        "top_p": 0.5,
        "parallel_tool_calls": False,
        "reasoning": {"effort": "low"},
        "store": False,
        "text": {"format": {"type": "json_schema", "name": "w", "schema": SCHEMA, "strict": True}},
        "tools": [
            {"type": "function", "name": "get_weather", "parameters": SCHEMA},
            {"type": "web_search"},
        ],
        "tool_choice": {"type": "function", "name": "get_weather"},
        "input": [
            {"role": "user", "content": [{"type": "input_text", "text": "Paris?"}]},
            {
                "type": "function_call",
                "call_id": "c1",
                "name": "get_weather",
                "arguments": '{"city":"Paris"}',
            },
            {"type": "function_call_output", "call_id": "c1", "output": "Sunny"},
        ],
    }
    got = t.responses_request(body, read_responses(body).ask, "r", False)
    assert got["messages"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Paris?"},
        sent_call("c1"),
        {"role": "tool", "tool_call_id": "c1", "content": "Sunny"},
    ]
    assert got["max_tokens"] == 32 and got["top_p"] == 0.5 and got["reasoning_effort"] == "low"
    assert got["parallel_tool_calls"] is False and "temperature" not in got
    assert [tool["function"]["name"] for tool in got["tools"]] == ["get_weather"]
    assert got["tool_choice"] == {"type": "function", "function": {"name": "get_weather"}}
    assert got["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "w", "schema": SCHEMA, "strict": True},
    }
    json_object = {"model": "m", "input": "hi", "text": {"format": {"type": "json_object"}}}
    assert t.responses_request(json_object, read_responses(json_object).ask, "r", True)[
        "response_format"
    ] == {"type": "json_object"}


def _chunk(delta: dict, finish: str | None = None, **more: object) -> dict:
    return {"choices": [{"index": 0, "delta": delta, "finish_reason": finish, **more}]}


def test_a_stream_becomes_pieces_text_then_the_calls_whole() -> None:
    reply = r.Reply(("END",))
    pieces = [
        reply.chunk(_chunk({"role": "assistant", "reasoning_content": "Hm."})),
        reply.chunk(_chunk({"content": "Let me"})),
        reply.chunk(_chunk({"content": " look."})),
        reply.chunk(
            _chunk(
                {
                    "tool_calls": [
                        {"index": 0, "id": "call_9", "function": {"name": "f", "arguments": ""}}
                    ]
                }
            )
        ),
        reply.chunk(_chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"a":'}}]})),
        reply.chunk(_chunk({"tool_calls": [{"index": 0, "function": {"arguments": " 1}"}}]})),
        reply.chunk(_chunk({}, "tool_calls")),
        reply.chunk({"choices": [], "usage": {"prompt_tokens": 7, "completion_tokens": 5}}),
        reply.end(),
    ]
    blocks = AnswerBlocks()
    events = [e for p in pieces for e in blocks.feed(p)] + blocks.finish()
    assert [(e.kind, e.block.kind, e.text) for e in events] == [
        ("start", "thinking", ""),
        ("delta", "thinking", "Hm."),
        ("stop", "thinking", ""),
        ("start", "text", ""),
        ("delta", "text", "Let me"),
        ("delta", "text", " look."),
        ("stop", "text", ""),
        ("start", "call", ""),
        ("delta", "call", '{"a": 1}'),
        ("stop", "call", ""),
    ]
    call = blocks.calls[0]
    assert (call.id, call.name, call.arguments) == ("call_9", "f", {"a": 1})
    assert (reply.prompt_tokens, reply.completion_tokens, reply.cached_tokens) == (7, 5, 0)
    assert reply.finish_reason == "tool_calls" and reply.stop_sequence is None


def test_a_whole_answer_its_stop_sequence_and_arguments_that_are_not_json() -> None:
    reply = r.Reply(("END",))
    completion = {
        "choices": [
            {
                "message": {
                    "content": "Hi",
                    "tool_calls": [
                        {
                            "id": "c",
                            "type": "function",
                            "function": {"name": "f", "arguments": "not json"},
                        },
                    ],
                },
                "finish_reason": "stop",
                "stop_reason": "END",  # vLLM's: the stop sequence that ended it
            }
        ],
        "usage": {
            "prompt_tokens": 3,
            "completion_tokens": 2,
            "prompt_tokens_details": {"cached_tokens": 1},
        },
    }
    piece = reply.whole_answer(completion)
    assert piece.content == "Hi" and piece.calls[0].arguments_json == "not json"
    assert piece.calls[0].arguments == {}
    assert reply.stop_sequence == "END" and reply.cached_tokens == 1
    assert json.loads(r.call(0, {"function": {"name": "g"}}).arguments_json) == {}


def test_the_upstreams_refusal_keeps_its_status_words_and_code() -> None:
    said = {"error": {"message": "too long", "code": "context_length_exceeded", "param": None}}
    got = refusal(json.dumps(said).encode(), 400)
    assert (got.status, str(got), got.code, got.param) == (
        400,
        "too long",
        "context_length_exceeded",
        None,
    )
    plain = refusal(b"Bad Gateway", 502)
    assert (plain.status, str(plain), plain.code) == (502, "Bad Gateway", None)


def test_thinking_comes_as_reasoning_or_reasoning_content() -> None:
    """vLLM names it `reasoning` since late 2025; DeepSeek, SGLang, llama.cpp
    `reasoning_content`."""
    reply = r.Reply()
    assert reply.chunk(_chunk({"reasoning": "Hm."})) == Parsed("", "Hm.")
    assert reply.chunk(_chunk({"reasoning_content": "So."})) == Parsed("", "So.")
    whole = {"choices": [{"message": {"content": "Hi", "reasoning": "Hm."}}]}
    assert r.Reply().whole_answer(whole).thinking == "Hm."
