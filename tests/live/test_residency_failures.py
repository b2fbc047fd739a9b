"""Model residency end to end, when a load fails or is abandoned: a truncated GGUF, a model
larger than the whole budget, and clients that leave while their model loads. In every case
the models already resident keep serving and the pool accounts for all the memory held.

The budgets and the way loads are counted are described in residency_support.py.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import threading
import time
from typing import Any

import openai
import pytest

from localserve.ground.units import format_size
from tests.support.daemons import free_port, serve_command
from tests.support.residency_support import (  # noqa: F401  (fixtures)
    CLIENT_TIMEOUT_S,
    GEMMA,
    SMOL,
    MiB,
    assert_complete,
    chat,
    fits_one,
    gemma_path,
    load_by_path,
    load_counts,
    openai_client,
    poll,
    post,
    resident,
    serve_args,
    sizes,
    stats,
)

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
    status, body = load_by_path(url, broken_gguf)
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
    cmd = serve_command(serve_args(broken_gguf), free_port())
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
    status, body = load_by_path(url, gemma_path)
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
        client = openai_client(url, timeout)
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
    client = openai_client(url, timeout=0.8)
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
