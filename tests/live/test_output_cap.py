"""The settings' max_tokens (#24): the cap of an answer whose request sets none, for every model
or per model by name, as Ollama's num_predict in a Modelfile. Codex sends no
max_output_tokens to a local server; a request's own cap still wins."""

from __future__ import annotations

from collections.abc import Iterator

import ollama
import openai
import pytest

from tests.support.live import CLIENT_TIMEOUT_S, running_daemon

STORY = [{"role": "user", "content": "Write a very long story about a lighthouse."}]


@pytest.fixture(scope="module")
def capped() -> Iterator[str]:
    args = ["--model", "smollm2", "--parallel", "2", "--ctx", "512", "--max-tokens", "40,smollm2=7"]
    with running_daemon(args) as (_, url):
        yield url


def openai_client(url: str) -> openai.OpenAI:
    return openai.OpenAI(
        base_url=f"{url}/v1", api_key="none", timeout=CLIENT_TIMEOUT_S, max_retries=0
    )


def test_an_answer_without_a_cap_stops_at_the_models_own(capped) -> None:
    answer = openai_client(capped).chat.completions.create(model="smollm2", messages=STORY)
    assert answer.usage.completion_tokens == 7 and answer.choices[0].finish_reason == "length"


def test_a_responses_request_without_max_output_tokens_is_capped(capped) -> None:
    response = openai_client(capped).responses.create(model="smollm2", input=STORY[0]["content"])
    assert response.usage.output_tokens == 7 and response.status == "incomplete"


def test_the_requests_own_cap_wins(capped) -> None:
    answer = openai_client(capped).chat.completions.create(
        model="smollm2", messages=STORY, max_tokens=12
    )
    assert answer.usage.completion_tokens == 12


def test_ollamas_num_predict_wins_and_its_absence_takes_the_cap(capped) -> None:
    client = ollama.Client(host=capped, timeout=CLIENT_TIMEOUT_S)
    assert client.chat(model="smollm2", messages=STORY).eval_count == 7
    assert (
        client.chat(model="smollm2", messages=STORY, options={"num_predict": 11}).eval_count == 11
    )
