"""One upstream's circuit breaker: closed (requests go), open (refused with a 503 at once, for
`retry_s`), then half-open (one trial goes; its outcome closes or opens it again).

Pure: the clock is handed in, so the unit tests step it. What counts as a failure is the
caller's business (a refused or timed-out connection, a stream cut off, a 502/503/504); an
upstream that answers, even with a 4xx, is up.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

CLOSED, OPEN, HALF_OPEN = "closed", "open", "half_open"


@dataclass
class Breaker:
    failures_to_open: int
    retry_s: float
    clock: Callable[[], float] = time.monotonic
    state: str = CLOSED
    failures: int = 0  # in a row
    opened_at: float = 0.0
    last_error: str | None = None
    trial_out: bool = field(default=False, repr=False)

    def allow(self) -> bool:
        """Whether a request may go now. Past the interval an open breaker lets one trial
        through (half-open); the others wait for its outcome, refused as if open."""
        if self.state == CLOSED:
            return True
        if self.state == OPEN and self.clock() - self.opened_at >= self.retry_s:
            self.state = HALF_OPEN
            self.trial_out = False
        if self.state == HALF_OPEN and not self.trial_out:
            self.trial_out = True
            return True
        return False

    def retry_in(self) -> float:
        """Seconds until an open breaker lets a trial through (0 when it would now)."""
        if self.state != OPEN:
            return 0.0
        return max(0.0, self.retry_s - (self.clock() - self.opened_at))

    def succeeded(self) -> None:
        self.state, self.failures, self.trial_out, self.last_error = CLOSED, 0, False, None

    def failed(self, reason: str) -> None:
        self.failures += 1
        self.last_error = reason
        if self.state == HALF_OPEN or self.failures >= self.failures_to_open:
            self.state, self.opened_at, self.trial_out = OPEN, self.clock(), False
