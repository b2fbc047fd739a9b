"""Model residency end to end, where models go: a budget that fits both serves without reloads,
one that fits one collates interleaved traffic; an eviction never aborts a request in flight,
a pinned model is never evicted, keep_alive 0 unloads, and loads are single-flight.

The budgets and the way loads are counted are described in residency_support.py; the load
failures are in test_residency_failures.py.
"""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import openai
import pytest

from tests.support import daemons
from tests.support.helpers import copy_prompt
from tests.support.live import start_daemon
from tests.support.residency_support import (  # noqa: F401  (fixtures)
    CLIENT_TIMEOUT_S,
    GEMMA,
    SMOL,
    assert_complete,
    chat,
    daemon_log,
    fits_both,
    fits_one,
    gemma_path,
    load_counts,
    openai_client,
    poll,
    post,
    resident,
    serve_args,
    sizes,
    stats,
)

# -- one daemon with a budget that fits both models, shared by the read-only tests -----


@pytest.fixture(scope="module")
def both_daemon(gemma_path: str, fits_both: int):
    proc, url = start_daemon(serve_args(SMOL, gemma_path, budget=fits_both))
    try:
        yield proc, url
    finally:
        daemons.discard(proc)


# -- 1. a budget that fits both: no reloads -----


def test_budget_that_fits_both_serves_interleaved_requests_without_reloading(both_daemon) -> None:
    _, url = both_daemon
    assert set(resident(url)) == {SMOL, GEMMA}
    assert load_counts(url) == {SMOL: 1, GEMMA: 1}
    client = openai_client(url)
    try:
        # Sequential rounds, switching model on every request.
        for model in (SMOL, GEMMA, SMOL, GEMMA, GEMMA, SMOL):
            assert_complete(chat(client, model))
            assert load_counts(url) == {SMOL: 1, GEMMA: 1}, f"a reload after a {model} request"
        # Concurrent rounds: both models busy at once.
        with ThreadPoolExecutor(6) as pool:
            for _ in range(2):
                models = [SMOL, GEMMA] * 3
                for response in pool.map(lambda m: chat(client, m), models):
                    assert_complete(response)
                assert load_counts(url) == {SMOL: 1, GEMMA: 1}
    finally:
        client.close()
    assert set(resident(url)) == {SMOL, GEMMA}


# -- 9. estimates against what llama.cpp allocated -----


def test_ps_estimate_is_within_15_percent_of_actual_memory_for_both_models(both_daemon) -> None:
    _, url = both_daemon
    models = resident(url)
    assert set(models) == {SMOL, GEMMA}
    figures = {}
    for name, entry in models.items():
        ls = entry["localserve"]
        est, actual = ls["memory_estimate"]["total"], ls["memory_actual"]
        assert entry["size"] == est, entry
        assert actual > 0, entry
        # The prompt cache is our own host memory, filled as slots are reused: llama.cpp's
        # buffers, which `actual` sums, hold the rest.
        figures[name] = (est - ls["memory_estimate"]["prompt_cache"], actual)
    report = "\n".join(
        f"{name}: estimate {e}, actual {a}, ratio {e / a:.3f}" for name, (e, a) in figures.items()
    )
    for est, actual in figures.values():
        assert 0.85 * actual <= est <= 1.15 * actual, report


# -- 2. a budget that fits one: concurrent interleaved traffic is collated -----

THREADS = 6
PER_THREAD = 3


def test_budget_that_fits_one_collates_interleaved_concurrent_requests(
    daemon_factory, gemma_path: str, fits_one: int
) -> None:
    """Six clients, each alternating models, three requests each: all complete, few swaps.

    The bound on loads. A manager that swapped in arrival order, one request at a time, would
    load once per model switch: here every client alternates, so that is up to one load per
    request (18). With collation a load serves every request already waiting for that model
    (single flight, and the resident model is drained once a swap has waited --max-pass-over),
    and a model that goes idle is evicted at once. Each client has one request outstanding and
    alternates, so while model X is resident no client can start waiting for X again until it
    has been served by the other model: after their first request the clients move in phases,
    one phase per load. Clients that start on different models need at most PER_THREAD + 1
    phases, i.e. PER_THREAD + 1 loads after start-up. We allow PER_THREAD + 3 (= 6, a third of
    the requests): two more for the benign race where the model just evicted wins the freed
    memory back before the model it was evicted for (one extra load each way).
    """
    proc, url = daemon_factory(
        serve_args(SMOL, gemma_path, budget=fits_one, extra=("--max-pass-over", "2"))
    )
    assert len(resident(url)) == 1, "the fits-one budget kept both models"
    before = load_counts(url)
    assert before == {SMOL: 1, GEMMA: 1}
    client = openai_client(url)
    issued: list[tuple[float, str]] = []
    lock = threading.Lock()

    def worker(i: int) -> list[tuple[str, Any]]:
        out = []
        for k in range(PER_THREAD):
            model = (SMOL, GEMMA)[(i + k) % 2]
            with lock:
                issued.append((time.monotonic(), model))
            out.append((model, chat(client, model)))
        return out

    try:
        with ThreadPoolExecutor(THREADS) as pool:
            results = [r for rs in pool.map(worker, range(THREADS)) for r in rs]
    finally:
        client.close()

    n_requests = THREADS * PER_THREAD
    assert len(results) == n_requests
    for model, response in results:
        assert response.model == model
        assert_complete(response)
    after = load_counts(url)
    loads = sum(after.values()) - sum(before.values())
    order = [m for _, m in sorted(issued)]
    switches = sum(a != b for a, b in zip(order, order[1:]))
    print(f"\n{n_requests} requests, {switches} switches in arrival order, {loads} loads: {after}")
    assert loads <= PER_THREAD + 3, (
        f"{loads} loads for {n_requests} requests ({switches} model switches in arrival order):"
        f" requests were not collated; load_counts {after}\n{daemon_log(proc)}"
    )


# -- 3. an eviction attempt never aborts a request in flight -----

LONG_TOKENS = 200


def test_in_flight_stream_survives_an_eviction_attempt_and_the_other_model_waits(
    daemon_factory, gemma_path: str, fits_one: int
) -> None:
    # Gemma first, so SmolLM2 is the one left resident; --max-pass-over 0 drains it at once.
    proc, url = daemon_factory(
        serve_args(gemma_path, SMOL, budget=fits_one, extra=("--max-pass-over", "0"))
    )
    assert set(resident(url)) == {SMOL}
    client = openai_client(url)
    other: dict[str, Any] = {}
    other_done = threading.Event()

    def request_other() -> None:
        try:
            other["response"] = chat(client, GEMMA)
        except Exception as exc:  # reported by the main thread
            other["error"] = exc
        finally:
            other_done.set()

    thread = threading.Thread(target=request_other, daemon=True)
    try:
        # A copying completion never meets an end-of-generation token: it runs to max_tokens.
        stream = client.completions.create(
            model=SMOL,
            prompt=copy_prompt("river"),
            temperature=0,
            max_tokens=LONG_TOKENS,
            stream=True,
            stream_options={"include_usage": True},
        )
        text, reason, usage, other_done_before_finish = [], None, None, None
        for chunk in stream:
            if chunk.usage is not None:
                usage = chunk.usage
            for choice in chunk.choices:
                text.append(choice.text)
                if choice.finish_reason is not None:
                    reason = choice.finish_reason
                    other_done_before_finish = other_done.is_set()
            if text and thread.ident is None:
                thread.start()  # the long stream is running: now ask for the other model
        if thread.ident is not None:
            thread.join(CLIENT_TIMEOUT_S)
    finally:
        client.close()

    assert reason == "length", f"the long stream ended with {reason!r}:\n{daemon_log(proc)}"
    assert usage is not None and usage.completion_tokens == LONG_TOKENS, usage
    assert "".join(text).count("river") >= 10, "".join(text)
    assert other_done.is_set(), "the request for the other model never finished"
    assert "error" not in other, f"the other model's request failed: {other.get('error')!r}"
    assert_complete(other["response"])
    # Its load needed the memory the stream's model held, which is given back only after the
    # stream's last chunk: it cannot have been served before the stream finished.
    assert other_done_before_finish is False
    assert load_counts(url) == {SMOL: 1, GEMMA: 2}


# -- 4. a pinned model is never evicted -----


@pytest.fixture(scope="module")
def pinned_refusal(gemma_path: str, fits_one: int):
    """SmolLM2 resident and pinned, fits-one budget; a chat to Gemma -> (url, its error).

    Module-scoped: the two tests below look at the same refusal (one daemon start, not two).
    """
    proc, url = start_daemon(
        serve_args(
            gemma_path,
            SMOL,
            budget=fits_one,
            extra=("--load-timeout", "5", "--max-pass-over", "1"),
        )
    )
    try:
        assert set(resident(url)) == {SMOL}
        status, body = post(f"{url}/api/admin/pin", {"model": SMOL, "pinned": True})
        assert status == 200 and body == {"model": SMOL, "pinned": True}, body
        client = openai_client(url)
        try:
            with pytest.raises(openai.APIStatusError) as info:
                chat(client, GEMMA)
        finally:
            client.close()
        yield url, info.value
    finally:
        daemons.discard(proc)


def test_pinned_model_is_not_evicted_and_the_other_gets_503_model_busy(pinned_refusal) -> None:
    url, error = pinned_refusal
    assert error.status_code == 503, error
    assert error.code == "model_busy", error
    models = resident(url)
    assert set(models) == {SMOL}
    assert models[SMOL]["localserve"]["pinned"] is True
    assert models[SMOL]["localserve"]["loads"] == 1
    assert load_counts(url) == {SMOL: 1, GEMMA: 1}  # Gemma's only load was at start-up
    assert set(stats(url)["pools"][0]["reserved"]) == {SMOL}
    client = openai_client(url)
    try:
        assert_complete(chat(client, SMOL))  # and the pinned model still serves
    finally:
        client.close()


def test_busy_error_names_the_requested_model_and_the_pinned_model_in_its_way(
    pinned_refusal,
) -> None:
    _, error = pinned_refusal
    message = error.message
    assert GEMMA in message, message
    assert SMOL in message and "pinned" in message, message


# -- 5. keep_alive 0 -----


def test_keep_alive_zero_unloads_the_model_after_the_request(daemon_factory) -> None:
    _, url = daemon_factory(serve_args(SMOL))
    assert set(resident(url)) == {SMOL}
    client = openai_client(url)
    try:
        assert_complete(chat(client, SMOL, extra_body={"keep_alive": 0}))
    finally:
        client.close()
    poll("smollm2 leaving /api/ps", lambda: SMOL not in resident(url))
    poll("smollm2's memory going back to the pool", lambda: not stats(url)["pools"][0]["reserved"])
    assert load_counts(url) == {SMOL: 1}


# -- 6. single-flight loads -----

CONCURRENT = 10


def test_concurrent_first_requests_to_an_evicted_model_load_it_once(
    daemon_factory, gemma_path: str, fits_one: int
) -> None:
    # Gemma first: loading SmolLM2 after it evicts it, so Gemma is known by its path only.
    _, url = daemon_factory(serve_args(gemma_path, SMOL, budget=fits_one))
    assert set(resident(url)) == {SMOL}
    assert load_counts(url) == {SMOL: 1, GEMMA: 1}
    client = openai_client(url)
    start = threading.Barrier(CONCURRENT)

    def one(_: int):
        start.wait()
        return chat(client, GEMMA)  # by name: the manager remembers the path

    try:
        with ThreadPoolExecutor(CONCURRENT) as pool:
            responses = list(pool.map(one, range(CONCURRENT)))
    finally:
        client.close()
    for response in responses:
        assert response.model == GEMMA
        assert_complete(response)
    assert load_counts(url)[GEMMA] == 2, load_counts(url)
    assert set(resident(url)) == {GEMMA}
