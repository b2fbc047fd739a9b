"""What the probe makes of a throwaway worker's run (engine/worker_client/probe.py): only a decoded
token is a success; a death, a reported error and a hang are failures."""

from __future__ import annotations

from localserve.engine.worker_client.probe import verdict_of


def test_a_decoded_token_is_a_success() -> None:
    assert verdict_of(None, True, [], 0.4) is None


def test_a_worker_that_died_fails_with_its_cause() -> None:
    assert verdict_of("signal SIGILL", False, [], 0.4) == "signal SIGILL"


def test_a_reported_error_is_a_failure() -> None:
    assert verdict_of(None, False, ["llama_decode failed"], 0.4) == (
        "the decode failed: llama_decode failed"
    )


def test_a_hang_is_a_failure_not_a_success() -> None:
    assert verdict_of(None, False, [], 120.0) == "no token within 120 s: the decode hung"
