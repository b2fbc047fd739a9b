"""A reasoning model's thinking is split from its answer: Ollama's `think` and
`message.thinking`, OpenAI's `reasoning_content`, for templates that write `<think>` blocks.

The model is the test copy of tools_support.py, whose template opens `<think>` when
`enable_thinking` is set. SmolLM2 never closes the block, so within num_predict everything it
writes is thinking; with thinking off, all of it is content.
"""

from __future__ import annotations

import ollama
import pytest

from tests.support.daemons import post_json
from tests.support.helpers import MODEL
from tests.support.live import CLIENT_TIMEOUT_S
from tests.support.ollama_support import ollama_client  # noqa: F401  (fixture)
from tests.support.tools_support import TOOLS_MODEL, tools_client, tools_daemon, tools_ollama  # noqa: F401

ASK = [{"role": "user", "content": "Why is the sky blue?"}]
GREEDY = {"temperature": 0, "num_predict": 20}


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
