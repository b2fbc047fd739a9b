"""Priority classes against a live daemon with one slot: a background request yields it to an
interactive one at the next step, and still ends with every token it was due."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import httpx
import openai
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.support.helpers import NO_END
from tests.support.live import CLIENT_TIMEOUT_S, running_daemon

LONG = "Write a very long story about a lighthouse keeper."
BACKGROUND = {"X-Priority": "background"}


@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    args = ["--model", "smollm2", "--parallel", "1", "--ctx", "1024", "--background-share", "0"]
    with running_daemon(args) as (_, url):
        yield url


@pytest.fixture(scope="module")
def client(url: str) -> Iterator[openai.OpenAI]:
    c = openai.OpenAI(base_url=f"{url}/v1", api_key="none", timeout=CLIENT_TIMEOUT_S, max_retries=0)
    yield c
    c.close()


def preemptions(url: str) -> float:
    text = httpx.get(f"{url}/metrics", timeout=30).text
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == "localserve_preemptions_total":
                return sample.value
    return 0.0


def test_an_interactive_request_is_answered_while_a_background_one_holds_the_only_slot(
    client: openai.OpenAI, url: str
) -> None:
    before = preemptions(url)
    done: dict[str, object] = {}

    def background() -> None:
        done["answer"] = client.chat.completions.create(
            model="smollm2",
            messages=[{"role": "user", "content": LONG}],
            max_tokens=200,
            temperature=0,
            extra_headers=BACKGROUND,
            logit_bias=NO_END,
        )
        done["at"] = time.monotonic()

    worker = threading.Thread(target=background)
    worker.start()
    time.sleep(1.0)  # the background answer is decoding in the slot
    quick = client.chat.completions.create(
        model="smollm2", messages=[{"role": "user", "content": "Hi"}], max_tokens=4, temperature=0
    )
    answered = time.monotonic()
    worker.join()
    assert quick.choices[0].message.content
    assert answered < done["at"]  # it did not wait for the background answer to end
    assert preemptions(url) > before
    answer = done["answer"]
    assert isinstance(answer, openai.types.chat.ChatCompletion)
    assert answer.choices[0].finish_reason == "length"
    assert answer.usage is not None and answer.usage.completion_tokens == 200


def test_background_embeddings_are_served(client: openai.OpenAI) -> None:
    answer = client.embeddings.create(
        model="smollm2", input="a lighthouse", extra_headers=BACKGROUND
    )
    assert len(answer.data[0].embedding) > 0


def test_the_body_field_asks_for_background_priority_on_the_ollama_face(url: str) -> None:
    answer = httpx.post(
        f"{url}/api/generate",
        json={"model": "smollm2", "prompt": "Hi", "stream": False, "priority": "background"},
        timeout=CLIENT_TIMEOUT_S,
    ).json()
    assert answer["done"] and answer["eval_count"] > 0


def test_an_unknown_priority_is_a_400_in_openais_format(client: openai.OpenAI) -> None:
    with pytest.raises(openai.BadRequestError) as raised:
        client.chat.completions.create(
            model="smollm2",
            messages=[{"role": "user", "content": "Hi"}],
            max_tokens=4,
            extra_headers={"X-Priority": "urgent"},
        )
    assert raised.value.body["param"] == "X-Priority"  # type: ignore[index]


def test_an_unknown_priority_is_a_400_in_ollamas_format(url: str) -> None:
    answer = httpx.post(
        f"{url}/api/generate",
        json={"model": "smollm2", "prompt": "Hi", "stream": False, "priority": "soon"},
        timeout=CLIENT_TIMEOUT_S,
    )
    assert answer.status_code == 400 and "priority" in answer.json()["error"]
