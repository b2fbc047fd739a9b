"""Tool use on Anthropic's Messages API with the official `anthropic` client, against live
daemons (SmolLM2, Gemma 3 270M, and the test model whose template takes tools, tools_support.py):
forced and automatic calls whose input its schema accepts, `disable_parallel_tool_use`,
`tool_choice: none`, tool input streamed as `input_json_delta`, tool results fed back (errors
too), and deferred tools left out."""

from __future__ import annotations

import json

import jsonschema
import pytest

from tests.support.agents_support import (  # noqa: F401  (fixtures)
    ANTHROPIC_TOOLS,
    ASK_WEATHER,
    COPY_TRIGGER,
    SCHEMAS,
    both,
    gemma,
    smol,
    thinker,
)
from tests.support.anthropic_support import ask, tool_uses
from tests.support.tools_support import tools_daemon  # noqa: F401  (fixture)

# -- tools ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("choice", [{"type": "any"}, {"type": "tool", "name": "get_time"}])
def test_a_forced_tool_choice_answers_with_tool_use_of_valid_input(both, choice) -> None:
    message = ask(
        both,
        [{"role": "user", "content": ASK_WEATHER}],
        max_tokens=80,
        tools=ANTHROPIC_TOOLS,
        tool_choice=choice,
    )
    uses = tool_uses(message)
    assert message.stop_reason == "tool_use" and uses
    for use in uses:
        assert use.id.startswith("toolu_") and isinstance(use.input, dict)
        jsonschema.validate(use.input, {**SCHEMAS[use.name], "additionalProperties": False})
    if choice["type"] == "tool":
        assert {u.name for u in uses} == {"get_time"}


def test_disable_parallel_tool_use_gives_one_call(thinker) -> None:
    message = ask(
        thinker,
        [{"role": "user", "content": ASK_WEATHER}],
        max_tokens=120,
        tools=ANTHROPIC_TOOLS,
        tool_choice={"type": "any", "disable_parallel_tool_use": True},
    )
    assert len(tool_uses(message)) == 1


def test_an_auto_call_starts_when_the_model_writes_the_trigger(thinker) -> None:
    message = ask(
        thinker, [{"role": "user", "content": COPY_TRIGGER}], max_tokens=80, tools=ANTHROPIC_TOOLS
    )
    assert message.stop_reason == "tool_use" and tool_uses(message)


def test_tool_choice_none_answers_in_text(thinker) -> None:
    message = ask(
        thinker,
        [{"role": "user", "content": COPY_TRIGGER}],
        max_tokens=20,
        tools=ANTHROPIC_TOOLS,
        tool_choice={"type": "none"},
    )
    assert not tool_uses(message) and message.stop_reason != "tool_use"


def test_streamed_tool_input_arrives_as_input_json_delta(both) -> None:
    events = list(
        ask(
            both,
            [{"role": "user", "content": ASK_WEATHER}],
            max_tokens=80,
            tools=ANTHROPIC_TOOLS,
            tool_choice={"type": "any"},
            stream=True,
        )
    )
    starts = [
        e for e in events if e.type == "content_block_start" and e.content_block.type == "tool_use"
    ]
    assert starts and starts[0].content_block.input == {}
    index = starts[0].index
    partial = "".join(
        e.delta.partial_json for e in events if e.type == "content_block_delta" and e.index == index
    )
    jsonschema.validate(json.loads(partial), SCHEMAS[starts[0].content_block.name])
    assert events[-2].delta.stop_reason == "tool_use"


def test_a_tool_result_fed_back_gets_an_answer(both) -> None:
    first = ask(
        both,
        [{"role": "user", "content": ASK_WEATHER}],
        max_tokens=80,
        tools=ANTHROPIC_TOOLS,
        tool_choice={"type": "tool", "name": "get_weather"},
    )
    use = tool_uses(first)[0]
    messages = [
        {"role": "user", "content": ASK_WEATHER},
        {"role": "assistant", "content": [b.model_dump() for b in first.content]},
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": use.id, "content": "Sunny, 21 C"},
                {"type": "text", "text": "Tell me in one sentence."},
            ],
        },
    ]
    answer = ask(both, messages, max_tokens=30, tools=ANTHROPIC_TOOLS, tool_choice={"type": "none"})
    assert answer.content[0].type == "text" and answer.content[0].text


def test_a_tool_result_may_be_an_error_in_text_blocks(smol) -> None:
    messages = [
        {"role": "user", "content": ASK_WEATHER},
        {
            "role": "assistant",
            "content": [
                {
                    "type": "tool_use",
                    "id": "toolu_1",
                    "name": "get_weather",
                    "input": {"city": "Paris"},
                }
            ],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_1",
                    "is_error": True,
                    "content": [{"type": "text", "text": "no network"}],
                }
            ],
        },
    ]
    assert ask(smol, messages, tools=ANTHROPIC_TOOLS).content


def test_a_deferred_tool_is_not_offered(smol) -> None:
    deferred = {**ANTHROPIC_TOOLS[1], "defer_loading": True}
    message = ask(
        smol,
        [{"role": "user", "content": ASK_WEATHER}],
        max_tokens=80,
        tools=[ANTHROPIC_TOOLS[0], deferred],
        tool_choice={"type": "any"},
    )
    assert {u.name for u in tool_uses(message)} == {"get_weather"}
