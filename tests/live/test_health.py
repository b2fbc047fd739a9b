"""GET /health: the liveness probe, answered by the event loop, never queued behind the engine."""

from __future__ import annotations

import threading
import time

from tests.support.helpers import MODEL, copy_prompt, raw_request

HEALTH_TIMEOUT_S = 5.0  # "quickly": a long generation here runs for tens of seconds


def test_health_is_a_200_json_status_ok_listing_the_loaded_model(daemon_url) -> None:
    status, headers, body = raw_request(f"{daemon_url}/health", timeout=HEALTH_TIMEOUT_S)
    assert status == 200
    assert headers.get("Content-Type", "").startswith("application/json")
    assert body["status"] == "ok"
    assert MODEL in body["models"]
    assert isinstance(body["version"], str) and body["version"]


def test_health_answers_quickly_while_a_long_generation_runs(client, daemon_url) -> None:
    started = threading.Event()
    stop = threading.Event()
    seen = {"chunks": 0, "finish_reason": None, "error": None}

    def generate() -> None:
        # A copying prompt has no natural end: it runs until told to stop or 800 tokens.
        try:
            stream = client.completions.create(
                model=MODEL,
                prompt=copy_prompt("castle"),
                temperature=0,
                max_tokens=800,
                stream=True,
            )
            with stream:
                for chunk in stream:
                    seen["chunks"] += 1
                    started.set()
                    if chunk.choices and chunk.choices[0].finish_reason:
                        seen["finish_reason"] = chunk.choices[0].finish_reason
                    if stop.is_set():
                        break
        except Exception as exc:  # reported by the main thread
            seen["error"] = exc
        finally:
            started.set()

    worker = threading.Thread(target=generate, daemon=True)
    worker.start()
    try:
        assert started.wait(60), "the long generation never produced a token"
        assert seen["error"] is None, seen["error"]
        chunks_before = seen["chunks"]
        for _ in range(5):
            t0 = time.monotonic()
            status, _, body = raw_request(f"{daemon_url}/health", timeout=HEALTH_TIMEOUT_S)
            elapsed = time.monotonic() - t0
            assert status == 200 and body["status"] == "ok"
            assert elapsed < HEALTH_TIMEOUT_S
            time.sleep(0.2)
        # The generation was going on while /health answered: it is not over, and goes on.
        assert seen["finish_reason"] is None and worker.is_alive()
        deadline = time.monotonic() + 30
        while seen["chunks"] == chunks_before and time.monotonic() < deadline:
            time.sleep(0.05)
        assert seen["chunks"] > chunks_before
        assert seen["finish_reason"] is None
    finally:
        stop.set()
        worker.join(30)
    assert seen["error"] is None, seen["error"]
