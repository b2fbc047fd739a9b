"""Ollama's residency rules through its official client: ps, empty requests load, keep_alive 0
unloads, a request's keep_alive sets how long the model stays.

Loading and unloading run on a daemon of their own (no `--model`), so the shared one keeps its
model."""

from __future__ import annotations

import time
from datetime import datetime, timedelta, timezone

import ollama
import pytest

from tests.support.live import CLIENT_TIMEOUT_S, CTX
from tests.support.ollama_support import MODEL, ollama_client  # noqa: F401  (fixture)

POLL_S = 15.0


def loaded(client: ollama.Client) -> list[str]:
    return [m.model for m in client.ps().models]


def wait_until(check, what: str) -> None:
    deadline = time.monotonic() + POLL_S
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {POLL_S}s: {what}")
        time.sleep(0.1)


@pytest.fixture
def bare(daemon_factory) -> ollama.Client:
    """A daemon of its own with nothing loaded (`serve` preloads the default model: unload it)."""
    _, url = daemon_factory(["--parallel", "2", "--ctx", "256"])
    client = ollama.Client(host=url, timeout=CLIENT_TIMEOUT_S)
    client.generate(model=MODEL, keep_alive=0)
    wait_until(lambda: loaded(client) == [], "the preloaded model unloads")
    return client


def test_ps_lists_the_loaded_model_with_its_details(ollama_client: ollama.Client) -> None:
    (entry,) = [m for m in ollama_client.ps().models if m.model == f"{MODEL}:latest"]
    assert entry.size > 0 and entry.context_length == CTX
    assert entry.details.format == "gguf" and entry.details.family == "llama"
    assert entry.expires_at is not None


def test_ps_gives_the_loaded_model_the_digest_list_gives_it(ollama_client: ollama.Client) -> None:
    listed = {m.model: m.digest for m in ollama_client.list().models}
    (entry,) = [m for m in ollama_client.ps().models if m.model == f"{MODEL}:latest"]
    assert entry.digest and entry.digest == listed[f"{MODEL}:latest"]


def test_an_empty_generate_loads_the_model(bare: ollama.Client) -> None:
    assert loaded(bare) == []
    r = bare.generate(model=MODEL)
    assert r.done and r.done_reason == "load" and r.response == ""
    assert loaded(bare) == [f"{MODEL}:latest"]


def test_an_empty_chat_loads_the_model(bare: ollama.Client) -> None:
    r = bare.chat(model=MODEL, messages=[])
    assert r.done and r.done_reason == "load" and r.message.content == ""
    assert loaded(bare) == [f"{MODEL}:latest"]


def test_keep_alive_zero_with_an_empty_generate_unloads_the_model(bare: ollama.Client) -> None:
    bare.generate(model=MODEL)
    r = bare.generate(model=MODEL, keep_alive=0)
    assert r.done_reason == "unload"
    wait_until(lambda: loaded(bare) == [], "the model unloads")


def test_keep_alive_zero_on_a_request_unloads_the_model_after_it(bare: ollama.Client) -> None:
    r = bare.generate(model=MODEL, prompt="Hi", keep_alive=0, options={"num_predict": 2})
    assert r.done and r.eval_count == 2
    wait_until(lambda: loaded(bare) == [], "the model unloads after its request")


def test_a_request_keep_alive_sets_when_the_model_expires(bare: ollama.Client) -> None:
    bare.generate(model=MODEL, keep_alive="1h")
    (entry,) = bare.ps().models
    left = entry.expires_at - datetime.now(timezone.utc)
    assert timedelta(minutes=55) < left <= timedelta(hours=1)
