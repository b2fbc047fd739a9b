"""Memory pools: per device, a budget and what is reserved in it, before anything is allocated.

One pool per device that can hold a model: the CPU's (system RAM) and each GPU that ggml
reports. A pool's name is what a user types in `--memory-budget cpu=12GiB,gpu0=7GiB`: `cpu`,
then `gpu0`, `gpu1`, ... in the order the GPUs are preferred (fastest first: discrete before
integrated, then the most free memory). Each budget defaults to the device's free memory less a
headroom for the rest of the desktop.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

import psutil

from localserve.ground.pin import CPU
from localserve.ground.units import GiB, format_size
from localserve_native.build_info import Device

# What we leave to the rest of the desktop when no budget is given.
DEFAULT_HEADROOM = 1 * GiB
# A GPU's: its display and other programs' contexts, and the driver's own allocations.
GPU_HEADROOM = 256 << 20
GPU_HEADROOM_SHARE = 0.05
# ggml's device kinds that get a GPU pool, fastest first.
_GPU_KINDS = ("gpu", "igpu")


@dataclass
class MemoryPool:
    """One device's budget. A load reserves its estimate here first; an unload gives it back
    only once the memory is really freed."""

    device: str
    budget: int
    reserved: dict[str, int] = field(default_factory=dict)
    kind: str = CPU  # cpu, gpu, igpu
    backend_device: str | None = None  # ggml's name for it ("Vulkan0", "CUDA0"); None: the CPU
    description: str = ""
    total: int | None = None  # the device's memory, where it says
    max_tensor: int | None = None  # the largest tensor it takes (None: no limit)

    @property
    def used(self) -> int:
        return sum(self.reserved.values())

    @property
    def free(self) -> int:
        return self.budget - self.used

    @property
    def is_gpu(self) -> bool:
        return self.kind != CPU

    def fits(self, need: int) -> bool:
        return need <= self.free

    def reserve(self, owner: str, need: int) -> None:
        self.reserved[owner] = self.reserved.get(owner, 0) + need

    def release(self, owner: str) -> None:
        self.reserved.pop(owner, None)

    def describe(self) -> dict[str, object]:
        return {
            "device": self.device,
            "kind": self.kind,
            "backend_device": self.backend_device,
            "description": self.description,
            "total": self.total,
            "budget": self.budget,
            "used": self.used,
            "free": self.free,
            "reserved": dict(self.reserved),
            "max_tensor": self.max_tensor,
        }


def system_ram_pool(budget: int | None = None, headroom: int = DEFAULT_HEADROOM) -> MemoryPool:
    """The CPU pool: the given budget, or the memory available now less a headroom."""
    if budget is None:
        budget = max(0, psutil.virtual_memory().available - headroom)
    return MemoryPool(CPU, budget, total=psutil.virtual_memory().total)


def gpu_headroom(total: int) -> int:
    return max(GPU_HEADROOM, int(total * GPU_HEADROOM_SHARE))


def device_pools(
    found: Iterable[Device], budgets: Mapping[str, int] | None = None
) -> list[MemoryPool]:
    """The CPU's pool and one per GPU, preferred first; `budgets` by pool name override the
    defaults. A budget for a device that is not here is refused: a typo must not pass silently."""
    budgets = dict(budgets or {})
    gpus = sorted(
        (d for d in found if d.kind in _GPU_KINDS),
        key=lambda d: (_GPU_KINDS.index(d.kind), -(d.memory_free or 0)),
    )
    pools = [system_ram_pool(budgets.pop(CPU, None))]
    for index, gpu in enumerate(gpus):
        name = f"gpu{index}"
        free, total = gpu.memory_free or 0, gpu.memory_total or gpu.memory_free or 0
        budget = budgets.pop(name, None)
        if budget is None:
            budget = max(0, free - gpu_headroom(total))
        pools.append(
            MemoryPool(
                name,
                budget,
                kind=gpu.kind,
                backend_device=gpu.name,
                description=gpu.description,
                total=total or None,
                max_tensor=gpu.max_tensor,
            )
        )
    if budgets:
        have = ", ".join(p.device for p in pools)
        raise ValueError(
            f"memory_budget names {', '.join(sorted(budgets))}, but this machine's devices "
            f"are {have}"
        )
    return pools


def summary(pools: Iterable[MemoryPool]) -> str:
    """One line for the log: each pool's budget."""
    return ", ".join(f"{p.device} {format_size(p.budget)}" for p in pools)
