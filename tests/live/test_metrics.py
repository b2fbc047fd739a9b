"""GET /metrics: after a known set of requests to a daemon of its own, the counters and
histograms say exactly what happened. The text is read with prometheus-client's own parser."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import ollama
import openai
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.support.live import CLIENT_TIMEOUT_S, running_daemon

ASK = [{"role": "user", "content": "Name three colours."}]


@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    with running_daemon(["--model", "smollm2", "--parallel", "2", "--ctx", "1024"]) as (_, url):
        yield url


def scrape(url: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample, by name and labels."""
    text = httpx.get(f"{url}/metrics", timeout=30).text
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def value(samples: dict, name: str, **labels: str) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


def test_metrics_is_prometheus_text_that_prometheus_client_parses(url: str) -> None:
    response = httpx.get(f"{url}/metrics", timeout=30)
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain; version=")
    names = {f.name for f in text_string_to_metric_families(response.text)}
    assert {
        "localserve_requests",
        "localserve_generated_tokens",
        "localserve_batch_size",
        "localserve_time_to_first_token_seconds",
        "localserve_pool_budget_bytes",
        "localserve_model_loads",
        "localserve_worker_restarts",
    } <= names


def test_requests_and_tokens_are_counted_by_face_model_and_status(url: str) -> None:
    before = scrape(url)
    ai = openai.OpenAI(base_url=f"{url}/v1", api_key="none", timeout=CLIENT_TIMEOUT_S)
    answers = [
        ai.chat.completions.create(model="smollm2", messages=ASK, max_tokens=8, temperature=0)
        for _ in range(2)
    ]
    chat = ollama.Client(host=url, timeout=CLIENT_TIMEOUT_S).chat(
        model="smollm2", messages=ASK, options={"num_predict": 5, "temperature": 0}
    )
    with pytest.raises(openai.NotFoundError):
        ai.chat.completions.create(model="no-such-model", messages=ASK, max_tokens=4)
    after = scrape(url)

    def grew(name: str, **labels: str) -> float:
        return value(after, name, **labels) - value(before, name, **labels)

    assert grew("localserve_requests_total", face="openai", model="smollm2", status="200") == 2
    assert grew("localserve_requests_total", face="ollama", model="smollm2", status="200") == 1
    assert grew("localserve_requests_total", face="openai", model="-", status="404") == 1
    prompt = sum(a.usage.prompt_tokens for a in answers) + chat.prompt_eval_count
    generated = sum(a.usage.completion_tokens for a in answers) + chat.eval_count
    assert grew("localserve_prompt_tokens_total", model="smollm2") == prompt
    assert grew("localserve_generated_tokens_total", model="smollm2") == generated
    assert grew("localserve_time_to_first_token_seconds_count", model="smollm2") == 3
    assert grew("localserve_request_duration_seconds_count", face="openai", model="smollm2") == 2


def test_a_repeated_prompt_counts_its_cached_tokens(url: str) -> None:
    ai = openai.OpenAI(base_url=f"{url}/v1", api_key="none", timeout=CLIENT_TIMEOUT_S)
    long = [{"role": "user", "content": "Tell me about the sea. " * 20}]
    ai.chat.completions.create(model="smollm2", messages=long, max_tokens=2, temperature=0)
    before = scrape(url)
    again = ai.chat.completions.create(model="smollm2", messages=long, max_tokens=2, temperature=0)
    after = scrape(url)
    cached = again.usage.prompt_tokens_details.cached_tokens
    assert cached > 0
    grew = value(after, "localserve_prompt_cached_tokens_total", model="smollm2") - value(
        before, "localserve_prompt_cached_tokens_total", model="smollm2"
    )
    assert grew == cached


def test_loads_are_counted_and_timed(url: str) -> None:
    before = scrape(url)
    httpx.post(f"{url}/api/admin/unload", json={"model": "smollm2"}, timeout=60)
    httpx.post(f"{url}/api/admin/load", json={"model": "smollm2"}, timeout=CLIENT_TIMEOUT_S)
    after = scrape(url)
    assert (
        value(after, "localserve_model_loads_total", model="smollm2")
        == value(before, "localserve_model_loads_total", model="smollm2") + 1
    )
    assert value(after, "localserve_model_load_seconds_total", model="smollm2") > value(
        before, "localserve_model_load_seconds_total", model="smollm2"
    )


def test_batching_and_pools_are_reported(url: str) -> None:
    ai = openai.OpenAI(base_url=f"{url}/v1", api_key="none", timeout=CLIENT_TIMEOUT_S)
    ai.chat.completions.create(model="smollm2", messages=ASK, max_tokens=4)
    samples = scrape(url)
    assert value(samples, "localserve_batch_size_count", model="smollm2") > 0
    assert value(samples, "localserve_sequences_running", model="smollm2") == 0
    assert value(samples, "localserve_pool_budget_bytes", device="cpu") > 0
    assert value(samples, "localserve_pool_reserved_bytes", device="cpu") > 0
    assert value(samples, "localserve_pool_actual_bytes", device="cpu") > 0
    assert value(samples, "localserve_worker_restarts_total", device="cpu") == 0


def test_no_metrics_turns_the_endpoint_off() -> None:
    with running_daemon(["--no-default-model", "--no-metrics"]) as (_, url):
        response = httpx.get(f"{url}/metrics", timeout=30)
        assert response.status_code == 404
        assert "error" in response.json()


@pytest.mark.parametrize("face", ["openai", "anthropic", "responses"])
def test_a_chat_request_is_one_round_trip_to_its_worker_before_its_first_step(url, face) -> None:
    """The worker tokenizes the rendered prompt as it queues it: one Submit, no Tokenize."""
    ai = openai.OpenAI(base_url=f"{url}/v1", api_key="none", timeout=CLIENT_TIMEOUT_S)
    ai.chat.completions.create(model="smollm2", messages=ASK, max_tokens=1)  # loaded, warm
    before = scrape(url)
    if face == "openai":
        ai.chat.completions.create(model="smollm2", messages=ASK, max_tokens=2)
    elif face == "responses":
        ai.responses.create(model="smollm2", input=ASK[0]["content"], max_output_tokens=2)
    else:
        httpx.post(
            f"{url}/v1/messages",
            timeout=CLIENT_TIMEOUT_S,
            json={"model": "smollm2", "messages": ASK, "max_tokens": 2},
        ).raise_for_status()
    after = scrape(url)
    sent = {
        kind: value(after, "localserve_worker_messages_total", device="cpu", kind=kind)
        - value(before, "localserve_worker_messages_total", device="cpu", kind=kind)
        for kind in ("Submit", "Tokenize", "Cancel", "Stats")
    }
    assert sent == {"Submit": 1, "Tokenize": 0, "Cancel": 0, "Stats": 0}
