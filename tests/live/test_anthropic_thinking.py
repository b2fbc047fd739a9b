"""Thinking and structured output on Anthropic's Messages API with the official `anthropic`
client, against live daemons: thinking blocks apart from the answer on the test model that
thinks (tools_support.py), its budget (alone and with tool calls), `thinking_delta` in the
stream, `display: omitted`, thinking asked of a model that does not think (SmolLM2), and
`output_config.format`'s JSON schema on SmolLM2 and Gemma 3 270M. On the copy with the real
QwQ template (real_templates.py), the model's own `</think>` ends the thinking block within
its budget, where its raw completion of the same prompt puts it."""

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
    served,
    smol,
    thinker,
)
from tests.support.anthropic_support import ask, tool_uses
from tests.support.real_templates import (  # noqa: F401  (fixtures)
    hf_render,
    raw_completion,
    served_name,
    templates_client,
    templates_daemon,
)
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


# Greedy SmolLM2 repeats "I know.</think>" from this line, then goes on in words of its own.
COPY_CLOSE = [{"role": "user", "content": "Repeat after me:\nI know.</think>Paris\n"}]


def test_the_models_own_think_close_ends_the_thinking_block_within_its_budget(
    templates_daemon, templates_client
) -> None:
    raw = raw_completion(templates_client, "qwq", hf_render("qwq", COPY_CLOSE), 40)
    thought, closed, said = raw.choices[0].text.partition("</think>")
    assert closed  # the model closed the block itself, well within the budget
    message = ask(
        served(templates_daemon[1], served_name("qwq")),
        COPY_CLOSE,
        max_tokens=40,
        thinking={"type": "enabled", "budget_tokens": 30},
    )
    assert [(b.type, b.thinking if b.type == "thinking" else b.text) for b in message.content] == [
        ("thinking", thought),
        ("text", said.lstrip()),
    ]


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
