"""The breaker's transitions, on a clock the test steps."""

from __future__ import annotations

from localserve.server.upstream.breaker import CLOSED, HALF_OPEN, OPEN, Breaker


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_it_opens_after_n_failures_in_a_row_and_a_success_resets_the_count() -> None:
    b = Breaker(3, 10.0, Clock())
    b.failed("refused")
    b.failed("refused")
    b.succeeded()
    b.failed("refused")
    b.failed("refused")
    assert b.state == CLOSED and b.allow()
    b.failed("timed out")
    assert b.state == OPEN and not b.allow()
    assert b.last_error == "timed out"


def test_after_the_interval_one_trial_goes_and_its_outcome_decides() -> None:
    clock = Clock()
    b = Breaker(1, 10.0, clock)
    b.failed("refused")
    clock.now += 9.0
    assert not b.allow() and round(b.retry_in()) == 1
    clock.now += 1.0
    assert b.allow() and b.state == HALF_OPEN
    assert not b.allow()  # only one trial at a time
    b.failed("refused again")
    assert b.state == OPEN and not b.allow()
    clock.now += 10.0
    assert b.allow()
    b.succeeded()
    assert b.state == CLOSED and b.allow() and b.allow() and b.failures == 0


def test_a_failed_trial_reopens_even_below_the_threshold() -> None:
    clock = Clock()
    b = Breaker(3, 5.0, clock)
    for _ in range(3):
        b.failed("x")
    clock.now += 5.0
    assert b.allow()
    b.failed("y")
    assert b.state == OPEN
