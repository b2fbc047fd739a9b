"""Memory pools: per device, a budget and what is reserved in it, before anything is allocated."""

from __future__ import annotations

from dataclasses import dataclass, field

import psutil

GiB = 1 << 30
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


_UNITS = {"": 1, "b": 1, "k": 1 << 10, "kb": 1 << 10, "kib": 1 << 10, "m": 1 << 20, "mb": 1 << 20,
          "mib": 1 << 20, "g": GiB, "gb": GiB, "gib": GiB, "t": 1 << 40, "tb": 1 << 40, "tib": 1 << 40}


def parse_size(text: str) -> int:
    """'512MiB', '2G', '1.5GB', '1048576' -> bytes (binary units throughout)."""
    s = text.strip().lower().replace(" ", "")
    i = len(s)
    while i and not (s[i - 1].isdigit() or s[i - 1] == "."):
        i -= 1
    number, unit = s[:i], s[i:]
    if not number or unit not in _UNITS:
        raise ValueError(f"not a memory size: {text!r} (try 512MiB or 4GiB)")
    return int(float(number) * _UNITS[unit])


def format_size(n: int) -> str:
    for unit, size in (("GiB", GiB), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if abs(n) >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n} B"
