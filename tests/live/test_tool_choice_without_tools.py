"""A tool call required of no tools cannot be honoured: on every agent face, `tool_choice` that
requires a call (OpenAI's "required" or a named function, Anthropic's `any` or `tool`) with no
tools is a 400 in the face's own error format naming tool_choice, never a free answer. A choice
that requires nothing (`auto`, `none`) is still answered."""

from __future__ import annotations

import anthropic
import openai
import pytest

from tests.support.agents_support import smol  # noqa: F401  (fixture)

ASK = [{"role": "user", "content": "What is the weather in Paris?"}]
NAMED = {"type": "function", "function": {"name": "get_weather"}}


def chat(s, **extra):
    return s.openai.chat.completions.create(
        model=s.model, messages=ASK, temperature=0, max_tokens=8, **extra
    )


def message(s, **extra):
    return s.anthropic.messages.create(
        model=s.model, messages=ASK, max_tokens=8, extra_body={"temperature": 0}, **extra
    )


@pytest.mark.parametrize("choice", ["required", NAMED], ids=["required", "named"])
def test_chat_completions_tool_choice_requiring_a_call_without_tools_is_a_400(smol, choice):
    with pytest.raises(openai.BadRequestError) as caught:
        chat(smol, tool_choice=choice)
    assert caught.value.body["param"] == "tool_choice"


def test_chat_completions_tool_choice_with_an_empty_tool_list_is_a_400(smol) -> None:
    with pytest.raises(openai.BadRequestError) as caught:
        chat(smol, tools=[], tool_choice="required")
    assert caught.value.body["param"] == "tool_choice"


@pytest.mark.parametrize("choice", ["auto", "none"])
def test_chat_completions_tool_choice_requiring_nothing_is_answered(smol, choice) -> None:
    assert chat(smol, tool_choice=choice).choices[0].message.content


@pytest.mark.parametrize(
    "choice", [{"type": "any"}, {"type": "tool", "name": "get_weather"}], ids=["any", "tool"]
)
def test_anthropic_tool_choice_requiring_a_call_without_tools_is_a_400(smol, choice) -> None:
    with pytest.raises(anthropic.BadRequestError) as caught:
        message(smol, tool_choice=choice)
    assert caught.value.body["type"] == "error"  # Anthropic's own error shape
    assert "tool_choice" in caught.value.body["error"]["message"]


def test_anthropic_tool_choice_auto_without_tools_is_answered(smol) -> None:
    assert message(smol, tool_choice={"type": "auto"}).content


def test_responses_tool_choice_required_without_tools_is_a_400(smol) -> None:
    with pytest.raises(openai.BadRequestError) as caught:
        smol.openai.responses.create(
            model=smol.model, input="Hello", max_output_tokens=8, tool_choice="required"
        )
    assert caught.value.body["param"] == "tool_choice"
