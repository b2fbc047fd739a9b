"""Priority classes against a live daemon with one slot: a background request yields it to an
interactive one at the next step, and still ends with every token it was due; interactive
requests that queue after a background one are served before it."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from datetime import datetime

import httpx
import openai
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.support.daemons import poll
from tests.support.helpers import NO_END, slots_in_use
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
    """By order, not by clock: the background answer holds the slot (its first token came) and
    has not ended when the interactive answer comes back, and afterwards it still ends with
    every token it was due."""
    before = preemptions(url)
    holding, ended = threading.Event(), threading.Event()
    done: dict[str, object] = {"tokens": 0}

    def background() -> None:
        stream = client.chat.completions.create(
            model="smollm2",
            messages=[{"role": "user", "content": LONG}],
            max_tokens=400,
            temperature=0,
            extra_headers=BACKGROUND,
            logit_bias=NO_END,
            stream=True,
            stream_options={"include_usage": True},
        )
        for chunk in stream:
            if chunk.choices and chunk.choices[0].delta.content:
                holding.set()
            if chunk.choices and chunk.choices[0].finish_reason:
                done["finish"] = chunk.choices[0].finish_reason
            if chunk.usage is not None:
                done["tokens"] = chunk.usage.completion_tokens
        ended.set()

    worker = threading.Thread(target=background)
    worker.start()
    assert holding.wait(CLIENT_TIMEOUT_S)
    quick = client.chat.completions.create(
        model="smollm2", messages=[{"role": "user", "content": "Hi"}], max_tokens=4, temperature=0
    )
    answered_first = not ended.is_set()
    worker.join()
    assert quick.choices[0].message.content
    assert answered_first  # it did not wait for the background answer to end
    assert preemptions(url) > before
    assert done["finish"] == "length"
    assert done["tokens"] == 400


def test_background_embeddings_are_served(client: openai.OpenAI) -> None:
    answer = client.embeddings.create(
        model="smollm2", input="a lighthouse", extra_headers=BACKGROUND
    )
    assert len(answer.data[0].embedding) > 0


def test_interactive_requests_queued_after_a_background_one_on_the_ollama_face_go_first(
    client: openai.OpenAI, url: str
) -> None:
    """The only slot is held until a background generate and then two interactive ones wait
    for it; when it frees, both interactive ones end before the background one (each answer's
    created_at is stamped by the daemon as it ends). The order is the scheduler's, not a
    race: all three wait before the slot frees, and it frees when the holder leaves."""
    ended: dict[str, dict] = {}

    def generate(name: str, **priority: str) -> None:
        body = {"model": "smollm2", "prompt": "Hi", "stream": False, **priority}
        body["options"] = {"num_predict": 8, "temperature": 0}
        answer = httpx.post(f"{url}/api/generate", json=body, timeout=CLIENT_TIMEOUT_S)
        ended[name] = answer.json()

    holder = client.chat.completions.create(
        model="smollm2",
        messages=[{"role": "user", "content": LONG}],
        max_tokens=900,
        temperature=0,
        logit_bias=NO_END,
        stream=True,
    )
    waiting: list[threading.Thread] = []
    with holder:
        next(iter(holder))  # the holder decodes in the only slot
        for name, priority in [("background", "background"), ("first", None), ("second", None)]:
            extra = {"priority": priority} if priority else {}
            waiting.append(threading.Thread(target=generate, args=(name,), kwargs=extra))
            waiting[-1].start()
            wait_queued(url, len(waiting))
        assert slots_in_use(url)["running"] == 1
    for thread in waiting:  # the holder left: its slot frees at the next step
        thread.join()
    assert all(answer["done"] and answer["eval_count"] > 0 for answer in ended.values())
    at = {name: datetime.fromisoformat(answer["created_at"]) for name, answer in ended.items()}
    assert at["first"] < at["background"] and at["second"] < at["background"]


def wait_queued(url: str, n: int) -> None:
    poll(f"{n} requests waiting", lambda: slots_in_use(url)["queued"] == n, 30)


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
