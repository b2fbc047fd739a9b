"""The ONNX backend through the official openai client: one real daemon serving a real ONNX model.

The model is SmolLM2-135M-Instruct exported to int4 by onnxruntime-genai's builder (see
tests/support/onnx_model.py: built on first use, then cached outside the repository). It is served
by path, under its folder's name, with up to 8 sequences per batch.
"""

from __future__ import annotations

import subprocess
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import httpx
import openai
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.support.daemons import log_text
from tests.support.helpers import COPY_WORDS, assert_capped_at, copy_prompt, raw_request, words_in
from tests.support.live import CLIENT_TIMEOUT_S, running_daemon
from tests.support.onnx_model import MODEL_NAME, ensure_model

CAPITAL = [{"role": "user", "content": "What is the capital of France?"}]


@pytest.fixture(scope="module")
def onnx_daemon() -> Iterator[tuple[subprocess.Popen, str]]:
    folder = ensure_model()
    # A KV cache type for every model, which onnxruntime-genai cannot take: the model loads
    # in its exported type and the log says so.
    args = ["--model", str(folder), "--parallel", "8", "--ctx", "1024", "--kv-cache-type", "q8_0"]
    with running_daemon(args) as served:
        yield served


@pytest.fixture(scope="module")
def client(onnx_daemon: tuple[subprocess.Popen, str]) -> Iterator[openai.OpenAI]:
    c = openai.OpenAI(
        base_url=f"{onnx_daemon[1]}/v1", api_key="none", timeout=CLIENT_TIMEOUT_S, max_retries=0
    )
    yield c
    c.close()


def test_folder_is_served_under_its_name_as_an_onnx_model(onnx_daemon) -> None:
    _, url = onnx_daemon
    status, _, body = raw_request(f"{url}/api/ps")
    assert status == 200, body
    entry = next(m for m in body["models"] if m["name"].removesuffix(":latest") == MODEL_NAME)
    assert entry["details"]["format"] == "onnx"
    assert entry["details"]["family"] == "llama"


def test_a_kv_cache_type_setting_is_not_applied_and_ps_and_the_log_say_so(onnx_daemon) -> None:
    proc, url = onnx_daemon
    _, _, body = raw_request(f"{url}/api/ps")
    entry = next(m for m in body["models"] if m["name"].removesuffix(":latest") == MODEL_NAME)
    assert entry["localserve"]["kv_cache_type"] == "f32"
    assert "--kv-cache-type q8_0 apply to llama.cpp's models only" in log_text(proc.log_path)


def test_greedy_chat_answer_names_paris(client: openai.OpenAI) -> None:
    response = client.chat.completions.create(
        model=MODEL_NAME, messages=CAPITAL, temperature=0, max_tokens=30
    )
    assert "Paris" in response.choices[0].message.content
    assert response.choices[0].finish_reason == "stop"
    assert response.usage.prompt_tokens > 0
    assert response.usage.total_tokens == (
        response.usage.prompt_tokens + response.usage.completion_tokens
    )


def test_streamed_chat_carries_the_same_greedy_answer(client: openai.OpenAI) -> None:
    whole = client.chat.completions.create(
        model=MODEL_NAME, messages=CAPITAL, temperature=0, max_tokens=30
    )
    stream = client.chat.completions.create(
        model=MODEL_NAME,
        messages=CAPITAL,
        temperature=0,
        max_tokens=30,
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = list(stream)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    reasons = [
        c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason
    ]
    assert text == whole.choices[0].message.content
    assert reasons == ["stop"]
    assert chunks[-1].usage.completion_tokens == whole.usage.completion_tokens


def test_eight_concurrent_requests_each_get_their_own_answer(client: openai.OpenAI) -> None:
    words = COPY_WORDS[:8]

    def complete(word: str) -> str:
        response = client.completions.create(
            model=MODEL_NAME, prompt=copy_prompt(word), temperature=0, max_tokens=12
        )
        return response.choices[0].text

    with ThreadPoolExecutor(len(words)) as pool:
        answers = list(pool.map(complete, words))
    for word, answer in zip(words, answers):
        assert words_in(answer) == {word}, (word, answer)


def test_max_tokens_caps_the_answer(client: openai.OpenAI) -> None:
    response = client.chat.completions.create(
        model=MODEL_NAME, messages=CAPITAL, temperature=0, max_tokens=3
    )
    assert_capped_at(response, 3)


def test_stop_string_ends_the_answer_before_it(client: openai.OpenAI) -> None:
    response = client.chat.completions.create(
        model=MODEL_NAME, messages=CAPITAL, temperature=0, max_tokens=30, stop=["Paris"]
    )
    content = response.choices[0].message.content
    assert "Paris" not in content and content.endswith("is ")
    assert response.choices[0].finish_reason == "stop"


def batch_sizes(url: str) -> dict[str, float]:
    """The model's localserve_batch_size histogram from the daemon's /metrics: sequences given
    news in each step of its batcher, as cumulative step counts by bound ("1", "2", "4", ...,
    "+Inf") and the sizes' "sum"."""
    text = httpx.get(f"{url}/metrics", timeout=30).text
    return {
        s.labels.get("le", s.name.rpartition("_")[2]): s.value
        for family in text_string_to_metric_families(text)
        if family.name == "localserve_batch_size"
        for s in family.samples
        if s.labels["model"] == MODEL_NAME
    }


def test_sampled_requests_with_mixed_settings_join_a_running_batch(
    client: openai.OpenAI, onnx_daemon
) -> None:
    _, url = onnx_daemon
    settings = [
        {"temperature": 0},
        {"temperature": 0.9, "top_p": 0.9},
        {"temperature": 0.7, "seed": 7},
        {"temperature": 1.2, "extra_body": {"top_k": 5, "repeat_penalty": 1.2}},
    ]

    def ask(kwargs: dict) -> openai.types.chat.ChatCompletion:
        return client.chat.completions.create(
            model=MODEL_NAME, messages=CAPITAL, max_tokens=16, **kwargs
        )

    running = client.completions.create(
        model=MODEL_NAME, prompt=copy_prompt("violin"), temperature=0, max_tokens=900, stream=True
    )
    try:
        next(iter(running))
        before = batch_sizes(url)
        with ThreadPoolExecutor(len(settings)) as pool:
            responses = list(pool.map(ask, settings))
    finally:
        running.close()
    d = {bound: after - before[bound] for bound, after in batch_sizes(url).items()}
    # The engine's own steps: some gave news to 5 sequences or more, the running one and these.
    assert d["+Inf"] - d["4"] > 0, d
    assert "Paris" in responses[0].choices[0].message.content
    for response in responses:
        assert response.choices[0].message.content
        assert response.choices[0].finish_reason in ("stop", "length")


def test_a_request_arriving_while_a_batch_runs_streams_before_the_batch_ends(
    client: openai.OpenAI,
) -> None:
    started = threading.Barrier(3)
    ended: list[float] = []

    def long_answer(word: str) -> None:
        stream = client.completions.create(
            model=MODEL_NAME, prompt=copy_prompt(word), temperature=0, max_tokens=200, stream=True
        )
        chunks = iter(stream)
        next(chunks)
        started.wait()
        for _ in chunks:
            pass
        ended.append(time.monotonic())

    with ThreadPoolExecutor(2) as pool:
        batch = [pool.submit(long_answer, word) for word in ("violin", "tiger")]
        started.wait(timeout=CLIENT_TIMEOUT_S)  # both stream: their batch runs
        late = client.completions.create(
            model=MODEL_NAME, prompt=copy_prompt("river"), temperature=0, max_tokens=12, stream=True
        )
        chunks = iter(late)
        first = next(c for c in chunks if c.choices and c.choices[0].text)
        first_at = time.monotonic()
        text = first.choices[0].text + "".join(c.choices[0].text for c in chunks if c.choices)
        for done in batch:
            done.result()
    assert first_at < min(ended), "the late request waited for the batch to end"
    assert words_in(text) == {"river"}, text


@pytest.mark.parametrize(
    "extra, field",
    [
        ({"response_format": {"type": "json_object"}}, "response_format"),
        (
            {"tools": [{"type": "function", "function": {"name": "f"}}], "tool_choice": "required"},
            "tools",
        ),
        ({"logit_bias": {"1": 5}}, "logit_bias"),
    ],
)
def test_constrained_answers_are_a_400_on_onnx_models(client: openai.OpenAI, extra, field) -> None:
    # onnxruntime-genai gives no logits to mask: refused, never answered unconstrained.
    with pytest.raises(openai.BadRequestError) as caught:
        client.chat.completions.create(model=MODEL_NAME, messages=CAPITAL, max_tokens=8, **extra)
    assert caught.value.body["param"] == field and "does not support" in caught.value.message
