"""A huge prompt holds the model from no other client (issue #57), through the official `openai`
and `ollama` clients.

- A text past the slot's context, as large as the body limit, is refused at once from the
  fewest tokens it can be (ground/token_floor.py), in OpenAI's error format, on /v1/completions,
  /v1/chat/completions and /v1/embeddings alike, where 16 MiB used to be tokenized first.
- A long text that may fit (Ollama cuts a prompt to its window, so it is read whole) is
  tokenized on a slow thread of the worker's (engine/worker_process/slow_asks.py): another
  client's completion, sent once the long text is at the worker, is answered before it.

Order and outcome only, never timings: speed is the benchmarks' (bench_hostile.py).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import httpx
import ollama
import openai
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.support.daemons import poll
from tests.support.helpers import MODEL
from tests.support.live import CLIENT_TIMEOUT_S, running_daemon

BODY_LIMIT = 16 << 20  # the default max_body of the generating routes
HUGE = "x" * (BODY_LIMIT - 200)
# Whitespace is the slowest text to tokenize per byte (one pre-tokenizer word): seconds here.
LONG = " " * (2 << 20) + "Hi"


@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    with running_daemon(["--model", MODEL, "--parallel", "2", "--ctx", "512"]) as (_, base):
        yield base


@pytest.fixture(scope="module")
def client(url: str) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(
        base_url=f"{url}/v1", api_key="none", timeout=CLIENT_TIMEOUT_S, max_retries=0
    ) as client:
        yield client


def tokenizes_sent(url: str) -> float:
    """The Tokenize asks the daemon has sent its worker."""
    text = httpx.get(f"{url}/metrics", timeout=30).text
    return sum(
        s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.name == "localserve_worker_messages_total" and s.labels.get("kind") == "Tokenize"
    )


def test_a_completion_prompt_at_the_body_limit_is_refused_for_the_context(
    client: openai.OpenAI,
) -> None:
    with pytest.raises(openai.BadRequestError) as err:
        client.completions.create(model=MODEL, prompt=HUGE, max_tokens=1)
    assert err.value.code == "context_length_exceeded" and err.value.param == "prompt"
    assert "the prompt has at least" in err.value.message and "512 tokens" in err.value.message
    # The model serves on.
    assert client.completions.create(model=MODEL, prompt="Hi", max_tokens=1).choices


def test_a_chat_message_at_the_body_limit_is_refused_for_the_context(
    client: openai.OpenAI,
) -> None:
    with pytest.raises(openai.BadRequestError) as err:
        client.chat.completions.create(
            model=MODEL, messages=[{"role": "user", "content": HUGE}], max_tokens=1
        )
    assert err.value.code == "context_length_exceeded" and err.value.param == "messages"
    assert "the prompt has at least" in err.value.message


def test_an_embeddings_input_at_the_body_limit_is_refused_for_the_context(
    client: openai.OpenAI,
) -> None:
    with pytest.raises(openai.BadRequestError) as err:
        client.embeddings.create(model=MODEL, input=["Hi", HUGE])
    assert err.value.code == "context_length_exceeded" and err.value.param == "input"
    assert "the prompt has at least" in err.value.message


def test_a_long_prompt_being_tokenized_holds_up_no_other_clients_completion(
    url: str, client: openai.OpenAI
) -> None:
    answers: dict[str, Any] = {}

    def ask_long() -> None:
        with ollama.Client(host=url, timeout=CLIENT_TIMEOUT_S) as long_client:
            answers["long"] = long_client.generate(
                model=MODEL, prompt=LONG, raw=True, options={"num_ctx": 16, "num_predict": 1}
            )

    before = tokenizes_sent(url)
    long = threading.Thread(target=ask_long)
    long.start()
    try:
        poll("the long prompt sent to be tokenized", lambda: tokenizes_sent(url) > before, 60)
        short = client.completions.create(model=MODEL, prompt="Hi", max_tokens=1)
        long_still_running = long.is_alive()
    finally:
        long.join(timeout=CLIENT_TIMEOUT_S)
    assert short.choices[0].finish_reason == "length"
    assert long_still_running, "the short completion waited for the long prompt's tokenizing"
    assert answers["long"].done  # cut to its window and answered
