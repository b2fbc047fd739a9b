"""Bounded work per request on a live daemon (issue #57), through the official `openai` and
`ollama` clients: an embeddings request over `max_embedding_tokens`, and a grammar whose compile
does not end within `compile_timeout`, are each a 400 naming the setting in the face's own
error format, and requests within them are served.

The daemon's bounds are tiny, to reach them cheaply: 16 tokens an embeddings request, and a
microsecond to compile, which no compile meets. A verdict that came late is kept, so each test
brings a grammar of its own (`schema`): a grammar asked for again would be answered.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import ollama
import openai
import pytest

from tests.support.helpers import MODEL
from tests.support.live import CLIENT_TIMEOUT_S, running_daemon

ARGS = [
    "--model",
    MODEL,
    "--parallel",
    "2",
    "--ctx",
    "1024",
    "--max-embedding-tokens",
    "16",
    "--compile-timeout",
    "0.000001",
]
LONG = "The cat sat on the mat. " * 8  # about 56 tokens
ASK = [{"role": "user", "content": "Tag this photo of a cat."}]


@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    with running_daemon(ARGS) as (_, base):
        yield base


@pytest.fixture(scope="module")
def openai_client(url: str) -> Iterator[openai.OpenAI]:
    client = openai.OpenAI(
        base_url=f"{url}/v1", api_key="none", timeout=CLIENT_TIMEOUT_S, max_retries=0
    )
    yield client
    client.close()


@pytest.fixture(scope="module")
def ollama_client(url: str) -> Iterator[ollama.Client]:
    client = ollama.Client(host=url, timeout=CLIENT_TIMEOUT_S)
    yield client
    client._client.close()


def schema(name: str) -> dict[str, Any]:
    """A schema no other test sends: its grammar was never compiled."""
    return {"type": "object", "properties": {name: {"type": "string"}}, "required": [name]}


# -- max_embedding_tokens --------------------------------------------------------------------


def test_openai_embeddings_over_max_embedding_tokens_is_a_400_naming_it(
    openai_client: openai.OpenAI,
) -> None:
    with pytest.raises(openai.BadRequestError) as err:
        openai_client.embeddings.create(model=MODEL, input=[LONG, "hello"])
    assert err.value.status_code == 400
    assert err.value.code == "max_embedding_tokens" and err.value.param == "input"
    assert "at most 16" in err.value.message and "(max_embedding_tokens)" in err.value.message


def test_openai_token_ids_over_max_embedding_tokens_are_a_400_naming_it(
    openai_client: openai.OpenAI,
) -> None:
    with pytest.raises(openai.BadRequestError) as err:
        openai_client.embeddings.create(model=MODEL, input=[[1] * 10, [2] * 10])
    assert err.value.code == "max_embedding_tokens"


def test_ollama_embed_over_max_embedding_tokens_is_a_400_naming_it(
    ollama_client: ollama.Client,
) -> None:
    with pytest.raises(ollama.ResponseError) as err:
        ollama_client.embed(model=MODEL, input=[LONG, "hello"])
    assert err.value.status_code == 400
    assert "at most 16" in err.value.error and "(max_embedding_tokens)" in err.value.error


def test_ollama_legacy_embeddings_over_max_embedding_tokens_is_a_400_naming_it(
    ollama_client: ollama.Client,
) -> None:
    with pytest.raises(ollama.ResponseError) as err:
        ollama_client.embeddings(model=MODEL, prompt=LONG)
    assert err.value.status_code == 400 and "(max_embedding_tokens)" in err.value.error


def test_embeddings_within_max_embedding_tokens_are_answered(
    openai_client: openai.OpenAI, ollama_client: ollama.Client
) -> None:
    answer = openai_client.embeddings.create(model=MODEL, input=["hello", "a cat"])
    assert len(answer.data) == 2 and answer.usage.prompt_tokens <= 16
    assert len(ollama_client.embed(model=MODEL, input="hello").embeddings) == 1


# -- compile_timeout -------------------------------------------------------------------------


def test_openai_tools_past_compile_timeout_are_a_400_naming_it(
    openai_client: openai.OpenAI,
) -> None:
    tool = {"type": "function", "function": {"name": "tag", "parameters": schema("tools")}}
    with pytest.raises(openai.BadRequestError) as err:
        openai_client.chat.completions.create(model=MODEL, messages=ASK, tools=[tool], max_tokens=8)
    assert err.value.status_code == 400
    assert err.value.code == "compile_timeout" and err.value.param == "tools"
    assert "(compile_timeout)" in err.value.message


def test_an_openai_response_format_past_compile_timeout_is_a_400_naming_it(
    openai_client: openai.OpenAI,
) -> None:
    spec = {"name": "x", "schema": schema("openai_format")}
    with pytest.raises(openai.BadRequestError) as err:
        openai_client.chat.completions.create(
            model=MODEL,
            messages=ASK,
            max_tokens=8,
            response_format={"type": "json_schema", "json_schema": spec},
        )
    assert err.value.code == "compile_timeout" and err.value.param == "response_format"


def test_an_ollama_format_past_compile_timeout_is_a_400_naming_it(
    ollama_client: ollama.Client,
) -> None:
    with pytest.raises(ollama.ResponseError) as err:
        ollama_client.chat(
            model=MODEL, messages=ASK, format=schema("ollama_format"), options={"num_predict": 8}
        )
    assert err.value.status_code == 400 and "(compile_timeout)" in err.value.error


def test_a_chat_without_a_grammar_is_answered_under_the_tiny_deadline(
    openai_client: openai.OpenAI,
) -> None:
    answer = openai_client.chat.completions.create(model=MODEL, messages=ASK, max_tokens=4)
    assert answer.choices[0].message.content is not None
