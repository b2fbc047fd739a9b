"""Reloads that no client can storm (#57), on a real daemon of Gemma 3 270M (trained: 32768
tokens a slot) on this CPU-only host, while another client's requests run beside them.

- Ollama's `num_gpu` on a host without a GPU asks nothing: alternating it reloads nothing.
- A `num_ctx` ladder grows the context to at least double each time (or the trained context).
  With 4 slots, Gemma weighs 872 MiB at 4096 tokens a slot and 1208 MiB at 32768: a 1800 MiB
  budget fits it to about 6,300 at load (half the budget) and holds 32768 whole, so a ladder
  from 4096 to 32768 reloads it at most three times.
- A model reloads for options at most once a `reload_interval`; a request past that runs as
  the model is loaded, and its `X-Localserve-Reload` header says so.
The unit rules are in tests/unit/engine/residency/test_reloads.py.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator

import httpx
import openai
import pytest

from tests.support.daemons import load_counts
from tests.support.live import CLIENT_TIMEOUT_S, running_daemon
from tests.support.residency_support import GEMMA, gemma_path  # noqa: F401  (fixture)

RELOAD_HEADER = "X-Localserve-Reload"


def serve(path: str, *extra: str) -> list[str]:
    return ["--model", path, "--memory-budget", "1800MiB", *extra]


@pytest.fixture
def storm_free(gemma_path: str) -> Iterator[str]:
    # Interval 0: only the context's doubling bounds the ladder's reloads.
    with running_daemon(serve(gemma_path, "--reload-interval", "0")) as (_, url):
        yield url


def generate(url: str, options: dict[str, int]) -> httpx.Response:
    body = {
        "model": GEMMA,
        "prompt": "Say hi.",
        "stream": False,
        "options": {"num_predict": 2, "temperature": 0, **options},
    }
    answer = httpx.post(f"{url}/api/generate", json=body, timeout=CLIENT_TIMEOUT_S)
    answer.raise_for_status()
    return answer


class Beside:
    """Another client, chatting through OpenAI's face until stopped; every answer counted."""

    def __init__(self, url: str) -> None:
        self.client = openai.OpenAI(base_url=f"{url}/v1", api_key="x", timeout=CLIENT_TIMEOUT_S)
        self.served = 0
        self.failures: list[str] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run)

    def _run(self) -> None:
        while not self.stop.is_set():
            try:
                self.client.chat.completions.create(
                    model=GEMMA, messages=[{"role": "user", "content": "Hi"}], max_tokens=2
                )
                self.served += 1
            except openai.OpenAIError as exc:
                self.failures.append(repr(exc))

    def __enter__(self) -> Beside:
        self.thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.stop.set()
        self.thread.join(timeout=CLIENT_TIMEOUT_S)


def test_twenty_requests_alternating_num_gpu_on_a_cpu_only_host_reload_nothing(
    storm_free: str,
) -> None:
    generate(storm_free, {})
    before = load_counts(storm_free)[GEMMA]
    with Beside(storm_free) as other:
        for i in range(20):
            generate(storm_free, {"num_gpu": 1 + i % 2})
    assert load_counts(storm_free)[GEMMA] == before
    assert other.failures == [] and other.served > 0


def test_a_num_ctx_ladder_from_4k_to_32k_reloads_at_most_three_times(storm_free: str) -> None:
    generate(storm_free, {"num_ctx": 4096})
    before = load_counts(storm_free)[GEMMA]
    with Beside(storm_free) as other:
        for num_ctx in range(8192, 32769, 4096):
            answer = generate(storm_free, {"num_ctx": num_ctx})
            assert RELOAD_HEADER not in answer.headers
    assert 1 <= load_counts(storm_free)[GEMMA] - before <= 3
    assert other.failures == [] and other.served > 0


def test_a_second_reload_within_the_interval_runs_as_loaded_and_says_so(gemma_path: str) -> None:
    with running_daemon(serve(gemma_path, "--reload-interval", "600")) as (_, url):
        generate(url, {"num_ctx": 8192})
        before = load_counts(url)[GEMMA]
        answer = generate(url, {"num_ctx": 32768})
        assert load_counts(url)[GEMMA] == before
        assert "runs as the model is loaded" in answer.headers[RELOAD_HEADER]
        assert "reload_interval" in answer.headers[RELOAD_HEADER]
