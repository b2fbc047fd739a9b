"""Thinking and structured output on Anthropic's Messages API with the official `anthropic`
client, against live daemons: thinking blocks apart from the answer on the test model that
thinks (tools_support.py), its budget (alone and with tool calls), `thinking_delta` in the
stream, `display: omitted`, thinking asked of a model that does not think (SmolLM2), and
`output_config.format`'s JSON schema on SmolLM2 and Gemma 3 270M."""

from __future__ import annotations

import json

import anthropic
import jsonschema
import pytest

from tests.support.agents_support import (  # noqa: F401  (fixtures)
    ANTHROPIC_TOOLS,
    ASK_WEATHER,
    both,
    gemma,
    smol,
    thinker,
)
from tests.support.anthropic_support import ask, tool_uses
from tests.support.tools_support import tools_daemon  # noqa: F401  (fixture)

# -- thinking and structured output --------------------------------------------------------------


def test_thinking_enabled_returns_thinking_blocks_apart(thinker) -> None:
    message = ask(thinker, max_tokens=40, thinking={"type": "enabled", "budget_tokens": 16})
    assert message.content[0].type == "thinking" and message.content[0].thinking
    assert "<think>" not in message.content[0].thinking


def test_thinking_ends_at_its_budget_and_the_answer_follows(thinker) -> None:
    # SmolLM2 never closes a <think> block of its own: the budget's grammar closes it.
    message = ask(thinker, max_tokens=40, thinking={"type": "enabled", "budget_tokens": 6})
    thinking, *rest = message.content
    assert thinking.type == "thinking" and 0 < len(thinking.thinking.split()) <= 6
    assert [b.type for b in rest] == ["text"] and rest[0].text


def test_a_thinking_budget_and_tool_calls_are_enforced_together(thinker) -> None:
    message = ask(
        thinker,
        [{"role": "user", "content": ASK_WEATHER}],
        max_tokens=90,
        thinking={"type": "enabled", "budget_tokens": 6},
        tools=ANTHROPIC_TOOLS,
        tool_choice={"type": "any"},
    )
    assert message.content[0].type == "thinking" and tool_uses(message)


def test_streamed_thinking_arrives_as_thinking_delta(thinker) -> None:
    events = list(
        ask(thinker, max_tokens=40, stream=True, thinking={"type": "enabled", "budget_tokens": 16})
    )
    deltas = [e.delta for e in events if e.type == "content_block_delta"]
    assert deltas and deltas[0].type == "thinking_delta" and deltas[0].thinking


def test_thinking_display_omitted_sends_blocks_without_their_text(thinker) -> None:
    message = ask(
        thinker,
        max_tokens=40,
        extra_body={"thinking": {"type": "enabled", "budget_tokens": 16, "display": "omitted"}},
    )
    assert message.content[0].type == "thinking" and message.content[0].thinking == ""


def test_adaptive_thinking_on_a_model_that_does_not_think_answers_directly(smol) -> None:
    message = ask(smol, thinking={"type": "adaptive"})
    assert [b.type for b in message.content] == ["text"]


def test_thinking_enabled_on_a_model_that_does_not_think_is_a_400(smol) -> None:
    with pytest.raises(anthropic.BadRequestError, match="thinking"):
        ask(smol, max_tokens=40, thinking={"type": "enabled", "budget_tokens": 16})


def test_output_config_format_gives_json_its_schema_accepts(both) -> None:
    schema = {
        "type": "object",
        "properties": {"name": {"type": "string", "maxLength": 20}, "age": {"type": "integer"}},
        "required": ["name", "age"],
    }
    message = ask(
        both,
        [{"role": "user", "content": "Describe a person as JSON."}],
        max_tokens=60,
        extra_body={"output_config": {"format": {"type": "json_schema", "schema": schema}}},
    )
    value = json.loads(message.content[0].text)
    jsonschema.validate(value, {**schema, "additionalProperties": False})
