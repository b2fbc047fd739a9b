"""Memory pools: per device, a budget and what is reserved in it, before anything is allocated."""

from __future__ import annotations

from dataclasses import dataclass, field

import psutil

from localserve.ground.units import GiB

# What we leave to the rest of the desktop when no budget is given.
DEFAULT_HEADROOM = 1 * GiB


@dataclass
class MemoryPool:
    """One device's budget. A load reserves its estimate here first; an unload gives it back
    only once the memory is really freed."""

    device: str
    budget: int
    reserved: dict[str, int] = field(default_factory=dict)

    @property
    def used(self) -> int:
        return sum(self.reserved.values())

    @property
    def free(self) -> int:
        return self.budget - self.used

    def fits(self, need: int) -> bool:
        return need <= self.free

    def reserve(self, owner: str, need: int) -> None:
        self.reserved[owner] = self.reserved.get(owner, 0) + need

    def release(self, owner: str) -> None:
        self.reserved.pop(owner, None)


def system_ram_pool(budget: int | None = None, headroom: int = DEFAULT_HEADROOM) -> MemoryPool:
    """The CPU pool: the given budget, or the memory available now less a headroom."""
    if budget is None:
        budget = max(0, psutil.virtual_memory().available - headroom)
    return MemoryPool("cpu", budget)
