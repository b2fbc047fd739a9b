"""What residency did since the daemon started, per model, for /metrics: evictions, seconds
spent loading, and requests that waited for room (swaps). Plain counts the manager bumps; the
server reads them at each scrape."""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field


@dataclass
class ResidencyTally:
    evictions: Counter[str] = field(default_factory=Counter)
    load_seconds: defaultdict[str, float] = field(default_factory=lambda: defaultdict(float))
    swap_waits: Counter[str] = field(default_factory=Counter)
    swap_wait_seconds: defaultdict[str, float] = field(default_factory=lambda: defaultdict(float))

    def swap(self, name: str, seconds: float) -> None:
        self.swap_waits[name] += 1
        self.swap_wait_seconds[name] += seconds
