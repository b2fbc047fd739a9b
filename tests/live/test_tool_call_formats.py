"""Tool calls through the real Llama 3.1, Llama 3.2 and Mistral Nemo chat templates, end to end
through the daemon with the official openai client (the copies of SmolLM2 of
tests/support/real_templates.py).

What each test proves with a 135M model that was never tuned on these formats: the request's
tools, and an earlier call and its result, reach the model exactly as Hugging Face renders the
template (the same tokens, checked through the slot's cache); the tools' grammar makes the model
write its call in the family's own format, which comes back as OpenAI tool_calls (a call cut
short leaves no markup in the content). What it cannot: that a model writes such a call unasked
(`auto`); SmolLM2 answers in prose.
"""

from __future__ import annotations

import json

import jsonschema
import openai
import pytest

from tests.support.real_templates import (  # noqa: F401  (fixtures)
    assert_prompted_with,
    hf_render,
    raw_completion,
    served_name,
    templates_client,
    templates_daemon,
)

WEATHER = {
    "type": "object",
    "properties": {"city": {"type": "string", "maxLength": 30}},
    "required": ["city"],
}
TIME = {
    "type": "object",
    "properties": {"zone": {"type": "string", "maxLength": 20}},
    "required": ["zone"],
}
SCHEMAS = {"get_weather": WEATHER, "get_time": TIME}
TOOLS = [
    {
        "type": "function",
        "function": {"name": name, "description": f"{name} by place", "parameters": s},
    }
    for name, s in SCHEMAS.items()
]
ASK = [{"role": "user", "content": "What is the weather in Paris?"}]
WEATHER_ONLY = {"type": "function", "function": {"name": "get_weather"}}
# Llama 3.2's template writes today's date unless told one; the same date on both sides.
DATE = {"date_string": "26 Jul 2024"}
# Each family's call as its template teaches it, up to the arguments, and how many tokens a
# call cut short needs to show that much.
FORMATS = {
    "llama3.1": ('{"name": "get_weather", "parameters": {', 12),
    "llama3.2": ('{"name": "get_weather", "parameters": {', 12),
    "mistral-nemo": ('[TOOL_CALLS][{"name": "get_weather", "arguments": {', 22),
}
# Mistral's template insists on call ids of 9 letters and digits.
EARLIER = [
    *ASK,
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "call12345",
                "type": "function",
                "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
            }
        ],
    },
    {"role": "tool", "tool_call_id": "call12345", "content": '{"celsius": 21}'},
]
# The same conversation as Hugging Face templates take it: arguments as an object.
EARLIER_AS_HF = [
    EARLIER[0],
    {
        **EARLIER[1],
        "tool_calls": [
            {
                **EARLIER[1]["tool_calls"][0],
                "function": {"name": "get_weather", "arguments": {"city": "Paris"}},
            }
        ],
    },
    EARLIER[2],
]


def chat(client: openai.OpenAI, name: str, messages=ASK, **extra):
    return client.chat.completions.create(
        model=served_name(name),
        messages=messages,
        tools=TOOLS,
        temperature=0,
        extra_body={"chat_template_kwargs": DATE},
        **{"max_tokens": 60, **extra},
    )


@pytest.mark.parametrize("name", list(FORMATS))
def test_the_tools_reach_the_model_as_the_real_template_renders_them(templates_client, name):
    primed = raw_completion(templates_client, name, hf_render(name, ASK, tools=TOOLS, **DATE))
    answer = chat(templates_client, name, tool_choice="required", max_tokens=1)
    assert_prompted_with(answer.usage, primed)


@pytest.mark.parametrize("name", list(FORMATS))
def test_an_earlier_call_and_its_result_reach_the_model_as_the_template_writes_them(
    templates_client, name
):
    rendered = hf_render(name, EARLIER_AS_HF, tools=TOOLS, **DATE)
    primed = raw_completion(templates_client, name, rendered)
    answer = chat(templates_client, name, EARLIER, max_tokens=1)
    assert_prompted_with(answer.usage, primed)


@pytest.mark.parametrize("name", list(FORMATS))
def test_a_forced_call_cut_short_ends_length_with_no_markup_in_the_content(templates_client, name):
    # The call's markup is the model's syntax, never text of the answer: cut short, it is
    # dropped (#56), where it once came back as content.
    cut = FORMATS[name][1]
    answer = chat(
        templates_client, name, tool_choice=WEATHER_ONLY, parallel_tool_calls=False, max_tokens=cut
    )
    choice = answer.choices[0]
    assert choice.finish_reason == "length" and not choice.message.tool_calls
    assert not choice.message.content, choice.message.content


@pytest.mark.parametrize("name", list(FORMATS))
def test_a_call_in_the_familys_format_comes_back_as_openai_tool_calls(templates_client, name):
    answer = chat(templates_client, name, tool_choice="required", parallel_tool_calls=False)
    choice = answer.choices[0]
    assert choice.finish_reason == "tool_calls"
    assert choice.message.content is None
    [call] = choice.message.tool_calls
    assert call.type == "function" and call.id
    jsonschema.validate(json.loads(call.function.arguments), SCHEMAS[call.function.name])


@pytest.mark.parametrize("name", list(FORMATS))
def test_a_streamed_call_in_the_familys_format_arrives_as_tool_call_deltas(templates_client, name):
    stream = chat(
        templates_client, name, tool_choice=WEATHER_ONLY, parallel_tool_calls=False, stream=True
    )
    chunks = [c for c in stream if c.choices]
    calls = [d for c in chunks for d in c.choices[0].delta.tool_calls or []]
    assert not "".join(c.choices[0].delta.content or "" for c in chunks)
    assert [d.function.name for d in calls if d.function.name] == ["get_weather"]
    arguments = "".join(d.function.arguments or "" for d in calls)
    jsonschema.validate(json.loads(arguments), WEATHER)
    assert chunks[-1].choices[0].finish_reason == "tool_calls"
