"""Where a model goes: which device's worker runs it, and how many of its layers that device
holds. Pure logic over the pools and what each could make room for; the manager acts on it, and
the supervisor carries out the `Placement` it decides (engine/worker_client/placement.py).

The rules, in order (Ollama's scheduler places the same way, but sizes models at about twice
what llama.cpp allocates, so it offloads less than fits; our estimates are within a few percent):
1. A pin wins: a device named, or a layer count (`num_gpu`, `--gpu-layers`; 0 is the CPU).
2. The whole model on the fastest GPU whose room holds it. Room counts the memory idle models
   hold there, so an idle model is evicted before a newcomer is only partly offloaded.
3. Otherwise the most layers that fit any GPU's room, the rest on the CPU (llama.cpp offloads
   the output layer first, then the repeating layers from the last).
4. Otherwise the CPU.
Busy and pinned models are never in a room: their memory is not to be had.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace

from localserve.engine.residency.pools import MemoryPool
from localserve.engine.worker_client.placement import Placement
from localserve.formats.offload import LayeredEstimate
from localserve.ground.errors import BadRequest, DoesNotFit
from localserve.ground.pin import AUTO, CPU, Pin
from localserve.ground.units import format_size


def check_device(pin: Pin, pools: Sequence[MemoryPool]) -> None:
    """BadRequest for a pin that names a device this machine has not."""
    if pin.device is not None and pin.device not in {p.device for p in pools}:
        have = ", ".join(p.device for p in pools)
        raise BadRequest(
            f"there is no device '{pin.device}' here; the devices are {have}", "device"
        )


def check_budgets(name: str, placement: Placement, pools: Mapping[str, MemoryPool]) -> None:
    """DoesNotFit where a device's share of `placement` is more than its whole budget."""
    for device, need in placement.need.items():
        budget = pools[device].budget
        if need.total > budget:
            raise DoesNotFit(
                f"model '{name}' needs {format_size(need.total)} but the {device} "
                f"memory budget is {format_size(budget)}"
            )


def as_it_takes_effect(pin: Pin, pools: Sequence[MemoryPool]) -> Pin:
    """`pin` as it can take effect on these pools: layers on a GPU, on a machine with none,
    ask nothing (as Ollama's num_gpu there), so that no layer count reloads a model that can
    only run on the CPU. A device that is not here is refused (before anything reloads)."""
    check_device(pin, pools)
    if pin.device is None and pin.gpu_layers is not None and not any(p.is_gpu for p in pools):
        return replace(pin, gpu_layers=None)
    return pin


def answers(placement: Placement, pin: Pin) -> bool:
    """Whether a model placed so serves a request that pins `pin`, or must be reloaded."""
    if pin.free or pin == placement.pin:
        return True
    if pin.ctx is not None and pin.ctx > placement.n_ctx_slot:
        return False
    if pin.device is not None and pin.device != placement.device:
        return False
    layers = pin.gpu_layers
    return layers is None or min(layers, placement.max_layers) == placement.gpu_layers


def on_cpu(estimate: LayeredEstimate, pin: Pin = AUTO) -> Placement:
    need = {CPU: estimate.whole}
    return Placement(CPU, 0, need, None, pin, estimate.max_layers, estimate.n_ctx_slot)


def offloaded(
    estimate: LayeredEstimate, pool: MemoryPool, layers: int, pin: Pin = AUTO
) -> Placement:
    split = estimate.split(layers, pool.max_tensor)
    if split.layers == 0:
        return on_cpu(estimate, pin)
    need = {CPU: split.host, pool.device: split.device}
    return Placement(
        pool.device,
        split.layers,
        need,
        pool.backend_device,
        pin,
        estimate.max_layers,
        estimate.n_ctx_slot,
    )


def place(
    estimate: LayeredEstimate,
    pools: Sequence[MemoryPool],
    room: Callable[[MemoryPool], int],
    pin: Pin = AUTO,
) -> Placement:
    """The placement for a model of `estimate`; `room(pool)` is what a pool could hold for it
    now (its free memory and what its idle models hold). `pools` are in preference order."""
    gpus = [p for p in pools if p.is_gpu]
    check_device(pin, pools)
    if pin.device == CPU or pin.gpu_layers == 0 or not estimate.max_layers:
        return on_cpu(estimate, pin)
    if pin.device is not None:
        gpus = [p for p in gpus if p.device == pin.device]
    if not gpus:
        return on_cpu(estimate, pin)
    if pin.gpu_layers is not None:
        # A count is honoured as given; the manager waits for room or says it does not fit.
        best = max(gpus, key=room)
        return offloaded(estimate, best, pin.gpu_layers, pin)
    for pool in gpus:
        if estimate.split(estimate.max_layers, pool.max_tensor).device.total <= room(pool):
            return offloaded(estimate, pool, estimate.max_layers, pin)
    layers, pool = max(((most_layers(estimate, p, room(p)), p) for p in gpus), key=lambda x: x[0])
    return offloaded(estimate, pool, layers, pin) if layers else on_cpu(estimate, pin)


def most_layers(estimate: LayeredEstimate, pool: MemoryPool, room: int) -> int:
    """The largest layer count whose share of `pool`'s device fits `room` (0: not one)."""
    low, high = 0, estimate.max_layers
    while low < high:  # a device's share grows with every layer offloaded
        mid = (low + high + 1) // 2
        if estimate.split(mid, pool.max_tensor).device.total <= room:
            low = mid
        else:
            high = mid - 1
    return low
