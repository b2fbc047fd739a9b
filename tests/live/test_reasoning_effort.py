"""Chat Completions' `reasoning_effort` through the official `openai` client: the template's
thinking switch, as Ollama's `think` levels are. "none" turns thinking off; any other level
turns it on; a level other than "none" asked of a model that does not think is a 400 naming
reasoning_effort, as OpenAI's API answers for a model without reasoning.

The thinking model is the test copy of SmolLM2 whose template opens `<think>` when
`enable_thinking` is set (tools_support.py): asked an ordinary question it never closes the
block, so with thinking on everything it writes is reasoning_content, and with it off all of it
is content. The real Qwen3 template (real_templates.py) shows that "none" reaches the template
as its own switch: it renders the empty thinking block Hugging Face renders for it.
"""

from __future__ import annotations

import openai
import pytest

from tests.support.helpers import MODEL
from tests.support.real_templates import (  # noqa: F401  (fixtures)
    assert_prompted_with,
    hf_render,
    raw_completion,
    served_name,
    templates_client,
    templates_daemon,
)
from tests.support.tools_support import TOOLS_MODEL, tools_client, tools_daemon  # noqa: F401

ASK = [{"role": "user", "content": "Why is the sky blue?"}]
CAP = 20


def chat(client, model: str, **fields):
    answer = client.chat.completions.create(
        model=model, messages=ASK, temperature=0, max_tokens=CAP, **fields
    )
    message = answer.choices[0].message
    return getattr(message, "reasoning_content", None), message.content


@pytest.mark.parametrize("level", ["minimal", "low", "medium", "high"])
def test_a_reasoning_effort_turns_a_thinking_models_thinking_on(tools_client, level) -> None:
    reasoning, content = chat(tools_client, TOOLS_MODEL, reasoning_effort=level)
    assert reasoning and not content


def test_reasoning_effort_none_turns_a_thinking_models_thinking_off(tools_client) -> None:
    on = chat(tools_client, TOOLS_MODEL, reasoning_effort="high")
    reasoning, content = chat(tools_client, TOOLS_MODEL, reasoning_effort="none")
    assert content and not reasoning
    assert content != on[0], "the prompt should change, not only where the text goes"


def test_reasoning_effort_none_renders_qwen3s_own_thinking_off_prompt(templates_client) -> None:
    rendered = hf_render("qwen3", ASK, enable_thinking=False)
    primed = raw_completion(templates_client, "qwen3", rendered, CAP)
    answer = templates_client.chat.completions.create(
        model=served_name("qwen3"),
        messages=ASK,
        temperature=0,
        max_tokens=CAP,
        reasoning_effort="none",
    )
    assert_prompted_with(answer.usage, primed)
    assert answer.choices[0].message.content == primed.choices[0].text


def test_a_reasoning_effort_on_a_model_that_does_not_think_is_a_400_naming_it(client) -> None:
    with pytest.raises(openai.BadRequestError) as caught:
        chat(client, MODEL, reasoning_effort="high")
    assert caught.value.body["param"] == "reasoning_effort"
    assert "does not support thinking" in caught.value.message


def test_reasoning_effort_none_on_a_model_that_does_not_think_answers_as_without(client) -> None:
    assert chat(client, MODEL, reasoning_effort="none") == chat(client, MODEL)


def test_an_unknown_reasoning_effort_is_a_400_naming_it(client) -> None:
    with pytest.raises(openai.BadRequestError) as caught:
        chat(client, MODEL, extra_body={"reasoning_effort": "extreme"})
    assert caught.value.body["param"] == "reasoning_effort"
    assert "must be one of none, minimal" in caught.value.message
