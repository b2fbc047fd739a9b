"""Output caps are upper bounds, never refusals (#44): agents send `max_tokens: 32000` to a model
whatever its context. On every face a cap above the room the prompt leaves is clamped to that
room, and an answer that fills it ends with the face's "length" reason. An Ollama num_ctx above
the loaded context runs in the loaded one, and the X-Localserve-Context header says so."""

from __future__ import annotations

import json
from collections.abc import Iterator

import anthropic
import ollama
import openai
import pytest

from tests.support.helpers import NO_END, raw_request
from tests.support.live import CLIENT_TIMEOUT_S, running_daemon

CTX = 256
AGENTS_CAP = 32000
STORY = [{"role": "user", "content": "Write a very long story about a lighthouse."}]
# An essay the 135M model keeps going at, greedily, past the context: for the faces that take no
# logit_bias to keep it from ending.
ESSAY = [{"role": "user", "content": "Write a 5000-word essay on the history of Rome."}]


@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    with running_daemon(["--model", "smollm2", "--parallel", "2", "--ctx", str(CTX)]) as (_, u):
        yield u


def openai_client(url: str) -> openai.OpenAI:
    return openai.OpenAI(
        base_url=f"{url}/v1", api_key="none", timeout=CLIENT_TIMEOUT_S, max_retries=0
    )


def test_a_chat_max_tokens_above_the_context_fills_it_and_ends_length(url: str) -> None:
    answer = openai_client(url).chat.completions.create(
        model="smollm2", messages=STORY, max_tokens=AGENTS_CAP, logit_bias=NO_END
    )
    assert answer.choices[0].finish_reason == "length"
    assert answer.usage.prompt_tokens + answer.usage.completion_tokens == CTX


def test_a_chat_max_completion_tokens_above_the_context_is_clamped(url: str) -> None:
    answer = openai_client(url).chat.completions.create(
        model="smollm2", messages=STORY, max_completion_tokens=AGENTS_CAP, logit_bias=NO_END
    )
    assert answer.choices[0].finish_reason == "length"
    assert answer.usage.prompt_tokens + answer.usage.completion_tokens == CTX


def test_a_completions_max_tokens_above_the_context_is_clamped(url: str) -> None:
    answer = openai_client(url).completions.create(
        model="smollm2", prompt="Once upon a time", max_tokens=AGENTS_CAP, logit_bias=NO_END
    )
    assert answer.choices[0].finish_reason == "length"
    assert answer.usage.prompt_tokens + answer.usage.completion_tokens == CTX


def test_a_responses_max_output_tokens_above_the_context_is_clamped(url: str) -> None:
    response = openai_client(url).responses.create(
        model="smollm2", input=ESSAY, max_output_tokens=AGENTS_CAP, temperature=0
    )
    assert response.status == "incomplete"
    assert response.usage.input_tokens + response.usage.output_tokens == CTX


def test_an_anthropic_max_tokens_above_the_context_is_clamped(url: str) -> None:
    client = anthropic.Anthropic(
        base_url=url, api_key="none", timeout=CLIENT_TIMEOUT_S, max_retries=0
    )
    message = client.messages.create(
        model="smollm2", messages=ESSAY, max_tokens=AGENTS_CAP, extra_body={"temperature": 0}
    )
    used = message.usage
    assert message.stop_reason == "max_tokens"
    # Anthropic's input_tokens leave out what was read from the prompt cache.
    assert used.input_tokens + (used.cache_read_input_tokens or 0) + used.output_tokens == CTX


def test_an_ollama_num_predict_above_the_context_is_clamped(url: str) -> None:
    client = ollama.Client(host=url, timeout=CLIENT_TIMEOUT_S)
    options = {"num_predict": AGENTS_CAP, "temperature": 0}
    r = client.chat(model="smollm2", messages=ESSAY, options=options)
    assert r.done_reason == "length" and r.prompt_eval_count + r.eval_count == CTX


def test_an_ollama_num_ctx_above_the_loaded_context_runs_in_it_and_says_so(url: str) -> None:
    body = {
        "model": "smollm2",
        "messages": STORY,
        "stream": False,
        "options": {"num_ctx": 131072, "num_predict": 3},
    }
    status, headers, answer = raw_request(f"{url}/api/chat", "POST", json.dumps(body).encode())
    assert status == 200 and answer["eval_count"] == 3
    assert headers["X-Localserve-Context"].startswith(f"{CTX}; num_ctx 131072 is above")
