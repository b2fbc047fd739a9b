"""A reasoning model's thinking is split from its answer: Ollama's `think` and
`message.thinking`, OpenAI's `reasoning_content`, for templates that write `<think>` blocks.

Two kinds of test copy of SmolLM2. The one of tools_support.py, whose template opens `<think>`
when `enable_thinking` is set: asked an ordinary question, SmolLM2 never closes the block, so
within num_predict everything it writes is thinking; with thinking off, all of it is content.
And those of real_templates.py with the real QwQ and Qwen3 templates: asked to repeat a line
that holds `</think>`, SmolLM2 writes that close itself, and the answer is split where it did,
exactly as the same model's raw completion of the same prompt (rendered by Hugging Face) reads.
"""

from __future__ import annotations

import ollama
import pytest
from openai.types import Completion

from tests.support.daemons import post_json
from tests.support.helpers import MODEL
from tests.support.live import CLIENT_TIMEOUT_S
from tests.support.ollama_support import ollama_client  # noqa: F401  (fixture)
from tests.support.real_templates import (  # noqa: F401  (fixtures)
    assert_prompted_with,
    hf_render,
    raw_completion,
    served_name,
    templates_client,
    templates_daemon,
    templates_ollama,
)
from tests.support.tools_support import TOOLS_MODEL, tools_client, tools_daemon, tools_ollama  # noqa: F401

ASK = [{"role": "user", "content": "Why is the sky blue?"}]
GREEDY = {"temperature": 0, "num_predict": 20}
# Greedy SmolLM2 repeats this line's start, "I know.</think>", then goes on in words of its own
# (checked against this model): after QwQ's generation prompt, which opens <think>, its own
# `</think>` ends the thinking.
COPY_CLOSE = [{"role": "user", "content": "Repeat after me:\nI know.</think>Paris\n"}]
CAP = 40


def test_ollama_think_true_returns_the_thinking_apart(tools_ollama) -> None:
    answer = tools_ollama.chat(model=TOOLS_MODEL, messages=ASK, think=True, options=GREEDY)
    assert answer.message.thinking and not answer.message.content
    assert "<think>" not in answer.message.thinking


def test_ollama_think_false_returns_only_content(tools_ollama) -> None:
    answer = tools_ollama.chat(model=TOOLS_MODEL, messages=ASK, think=False, options=GREEDY)
    assert answer.message.content and not answer.message.thinking


def test_ollama_streamed_thinking_arrives_in_thinking_pieces(tools_ollama) -> None:
    chunks = list(
        tools_ollama.chat(model=TOOLS_MODEL, messages=ASK, think=True, stream=True, options=GREEDY)
    )
    assert "".join(c.message.thinking or "" for c in chunks)
    assert not "".join(c.message.content for c in chunks)


def test_ollama_generate_thinks_too(tools_ollama) -> None:
    answer = tools_ollama.generate(
        model=TOOLS_MODEL, prompt="Why is the sky blue?", think=True, options=GREEDY
    )
    assert answer.thinking and not answer.response


def test_openai_reasoning_content_streams_apart_from_content(tools_daemon) -> None:
    # OpenAI's API has no switch for thinking; the template's default (off here) applies, so
    # ask through llama.cpp's chat_template_kwargs, which we take as Ollama's think.
    body = {
        "model": TOOLS_MODEL,
        "messages": ASK,
        "max_tokens": 20,
        "temperature": 0,
        "chat_template_kwargs": {"enable_thinking": True},
    }
    status, answer = post_json(
        f"{tools_daemon[1]}/v1/chat/completions", body, timeout=CLIENT_TIMEOUT_S
    )
    assert status == 200, answer
    message = answer["choices"][0]["message"]
    assert message["reasoning_content"] and not message["content"]


def test_show_lists_thinking_for_a_template_with_think_blocks(tools_ollama, ollama_client) -> None:
    assert "thinking" in tools_ollama.show(TOOLS_MODEL).capabilities
    assert "thinking" not in ollama_client.show(MODEL).capabilities


def test_think_on_a_model_that_does_not_think_is_a_400(ollama_client) -> None:
    with pytest.raises(ollama.ResponseError) as caught:
        ollama_client.chat(model=MODEL, messages=ASK, think=True)
    assert caught.value.status_code == 400 and "thinking" in caught.value.error


# -- real templates, and the model's own </think> ----------------------------------------------


def raw_split(client, name: str, messages, **variables) -> tuple[str, str, Completion]:
    """The model's raw answer to the prompt Hugging Face renders, split at its own `</think>`
    (the blank lines after it are the answer's margin, not its text), and that completion."""
    primed = raw_completion(client, name, hf_render(name, messages, **variables), CAP)
    thinking, closed, content = primed.choices[0].text.partition("</think>")
    assert closed, primed.choices[0].text  # the model did close the block
    return thinking, content.lstrip(), primed


def test_the_models_own_think_close_splits_reasoning_content_from_content(templates_client):
    thinking, content, primed = raw_split(templates_client, "qwq", COPY_CLOSE)
    answer = templates_client.chat.completions.create(
        model=served_name("qwq"), messages=COPY_CLOSE, temperature=0, max_tokens=CAP
    )
    assert_prompted_with(answer.usage, primed)
    message = answer.choices[0].message
    assert (getattr(message, "reasoning_content", None), message.content) == (thinking, content)


def test_streamed_reasoning_and_content_meet_where_the_model_closed_the_block(templates_client):
    thinking, content, _ = raw_split(templates_client, "qwq", COPY_CLOSE)
    stream = templates_client.chat.completions.create(
        model=served_name("qwq"), messages=COPY_CLOSE, temperature=0, max_tokens=CAP, stream=True
    )
    deltas = [c.choices[0].delta for c in stream if c.choices]
    reasoning = [getattr(d, "reasoning_content", None) or "" for d in deltas]
    said = [d.content or "" for d in deltas]
    assert ("".join(reasoning), "".join(said)) == (thinking, content)
    # Every piece of thinking comes before the first piece of the answer.
    last_thought = max(i for i, r in enumerate(reasoning) if r)
    assert not any(said[: last_thought + 1])


def test_ollama_thinking_and_content_meet_where_the_model_closed_the_block(
    templates_client, templates_ollama
):
    thinking, content, _ = raw_split(templates_client, "qwq", COPY_CLOSE)
    # Ollama's default repeat_penalty of 1.1 would make another answer than the raw one.
    options = {"temperature": 0, "num_predict": CAP, "repeat_penalty": 1.0}
    answer = templates_ollama.chat(
        model=served_name("qwq"), messages=COPY_CLOSE, think=True, options=options
    )
    assert (answer.message.thinking, answer.message.content) == (thinking, content)


def test_qwen3_with_thinking_off_is_prompted_with_an_empty_block_and_answers_in_content(
    templates_client,
):
    rendered = hf_render("qwen3", ASK, enable_thinking=False)
    assert rendered.endswith("<think>\n\n</think>\n\n")
    primed = raw_completion(templates_client, "qwen3", rendered, CAP)
    answer = templates_client.chat.completions.create(
        model=served_name("qwen3"),
        messages=ASK,
        temperature=0,
        max_tokens=CAP,
        extra_body={"chat_template_kwargs": {"enable_thinking": False}},
    )
    assert_prompted_with(answer.usage, primed)
    message = answer.choices[0].message
    assert message.content == primed.choices[0].text
    assert getattr(message, "reasoning_content", None) is None
