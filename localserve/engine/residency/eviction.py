"""Which models give way when a load needs room, and what a load that waited too long is told.

The manager (manager.py) applies these rules to its own state; they decide nothing else. As in
Ollama's scheduler, the model that gives way is the least recently used idle one whose memory
helps; busy and pinned models never do.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping

from localserve.engine.residency.pools import MemoryPool
from localserve.engine.worker_client.placement import Placement
from localserve.engine.worker_client.resident import ResidentModel
from localserve.ground.errors import ModelBusy
from localserve.ground.units import format_size


def evictable(model: ResidentModel, waiters: Mapping[str, int]) -> bool:
    """Idle, unpinned, and not just loaded for requests that have yet to take it (they
    resume a moment after the load; a request for another model can run in between)."""
    return model.idle and not model.pinned and not waiters.get(model.name)


def room(pool: MemoryPool, residents: Collection[ResidentModel], waiters: Mapping[str, int]) -> int:
    """What `pool` could hold for a newcomer now: its free memory and what its idle,
    unpinned models hold (placement evicts them before it offloads less)."""
    idle = sum(pool.reserved.get(m.name, 0) for m in residents if evictable(m, waiters))
    return pool.free + idle


def short_pools(pools: Mapping[str, MemoryPool], placement: Placement) -> list[MemoryPool]:
    """The pools that cannot yet hold their share of `placement`."""
    return [
        pools[device]
        for device, need in placement.need.items()
        if not pools[device].fits(need.total)
    ]


def idle_victim(
    name: str,
    short: list[MemoryPool],
    over_cap: bool,
    residents: Collection[ResidentModel],
    waiters: Mapping[str, int],
) -> ResidentModel | None:
    """The least recently used idle model whose eviction helps: one holding memory in a
    pool that is short, or any, when the model count is what is over."""
    idle = [
        m
        for m in residents
        if m.name != name
        and evictable(m, waiters)
        and (over_cap or any(p.reserved.get(m.name) for p in short))
    ]
    return min(idle, key=lambda m: m.last_used, default=None)


def timed_out(
    name: str,
    load_timeout: float,
    residents: Collection[ResidentModel],
    pools: Collection[MemoryPool],
) -> ModelBusy:
    """The error of a load that waited `load_timeout` seconds for room: what was in its way."""
    others = [m for m in residents if m.name != name]
    busy = ", ".join(m.name for m in others if not m.idle) or "none"
    pinned = ", ".join(m.name for m in others if m.pinned) or "none"
    budgets = ", ".join(f"{p.device} {format_size(p.budget)}" for p in pools)
    return ModelBusy(
        f"timed out after {load_timeout:.0f}s waiting for memory to load "
        f"'{name}'; busy models: {busy}; pinned models: {pinned}; memory budget "
        f"{budgets}"
    )
