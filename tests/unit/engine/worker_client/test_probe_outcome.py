"""What the probe makes of a throwaway worker's run (engine/worker_client/probe.py): only a
decode that ends is a success; a death, a reported error and a hang are failures; a token costs
what the steps after the first took."""

from __future__ import annotations

from localserve.engine.worker_client.probe import ms_per_token, verdict_of, weight_buffers


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


def test_a_decode_that_stops_midway_is_a_failure() -> None:
    assert verdict_of(None, False, [], 120.0, steps=3) == (
        "the decode stopped after 3 steps and 120 s: it hung"
    )


def test_a_token_costs_the_time_after_the_first_step_over_the_tokens_after_it() -> None:
    assert ms_per_token([(10.0, 1), (10.006, 2), (10.012, 3)]) == 6.0


def test_one_step_gives_no_cost() -> None:
    assert ms_per_token([(10.0, 1)]) is None


def test_the_weights_buffer_types_are_the_model_buffers() -> None:
    buffers = {"cpu_repack model": 50, "cpu_mapped model": 40, "cpu kv": 9, "cpu compute": 3}
    assert weight_buffers(buffers) == ("cpu_mapped", "cpu_repack")
