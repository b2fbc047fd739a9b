"""The test-only faults a worker injects (engine/worker_process/faults.py): one switch, off
unless set, and a misspelt fault stops the worker instead of passing for none."""

from __future__ import annotations

import time

import pytest

from localserve.engine.worker_process.faults import SWITCH, Fault


def test_no_switch_is_no_fault() -> None:
    assert Fault.from_env({}) == Fault()


def test_abort_at_step_reads_its_step() -> None:
    assert Fault.from_env({SWITCH: "abort-at-step:40"}) == Fault("abort-at-step", 40)


def test_the_extra_buffer_faults_take_no_number() -> None:
    assert Fault.from_env({SWITCH: "hang-with-extra-bufts"}).kind == "hang-with-extra-bufts"
    with pytest.raises(SystemExit):
        Fault.from_env({SWITCH: "hang-with-extra-bufts:3"})


@pytest.mark.parametrize("text", ["abort-at-step", "abort-at-step:x", "sigill", "1"])
def test_a_misspelt_fault_stops_the_worker(text: str) -> None:
    with pytest.raises(SystemExit, match=SWITCH):
        Fault.from_env({SWITCH: text})


def test_a_fault_on_extra_buffer_types_waits_for_a_model_loaded_with_them() -> None:
    Fault("sigill-with-extra-bufts").at(1, extra_bufts_loaded=False)  # returns: not due
    Fault("abort-at-step", 5).at(4, extra_bufts_loaded=True)


def test_slow_steps_take_their_milliseconds_longer() -> None:
    fault = Fault.from_env({SWITCH: "slow-steps:50"})
    assert fault == Fault("slow-steps", 50)
    started = time.monotonic()
    fault.at(1, extra_bufts_loaded=False)
    assert time.monotonic() - started >= 0.05
