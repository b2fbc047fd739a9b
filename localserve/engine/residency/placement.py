"""Where a model goes: which device's worker runs it, and how many of its layers that device
holds. Pure logic over the pools and what each could make room for; the manager acts on it.

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

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

from localserve.engine.residency.pools import CPU, MemoryPool
from localserve.formats import MemoryEstimate
from localserve.formats.offload import LayeredEstimate
from localserve.ground.errors import BadRequest


@dataclass(frozen=True)
class Pin:
    """A request's or the operator's say in placement; None leaves it to the rules."""

    device: str | None = None  # a pool's name: "cpu", "gpu0"
    gpu_layers: int | None = None  # None: as many as fit
    ctx: int | None = None  # a context per slot (Ollama's num_ctx); None: the settings'

    @property
    def free(self) -> bool:
        return self.device is None and self.gpu_layers is None and self.ctx is None

    def or_layers(self, gpu_layers: int | None) -> Pin:
        """This pin, with the settings' `gpu_layers` where it names neither device nor layers."""
        if self.device is None and self.gpu_layers is None and gpu_layers is not None:
            return replace(self, gpu_layers=gpu_layers)
        return self


AUTO = Pin()


@dataclass(frozen=True)
class Placement:
    """A model's device and what it reserves in each pool it touches."""

    device: str  # the pool whose worker runs it
    gpu_layers: int  # layers that device holds (0 on the CPU)
    need: dict[str, MemoryEstimate] = field(default_factory=dict)
    backend_device: str | None = None  # ggml's device name, for the worker
    pin: Pin = AUTO  # what it was placed for
    max_layers: int = 0  # the model's layer count that offloads it all
    n_ctx_slot: int = 0  # the context per slot its estimate sized (0: the settings')

    @property
    def total(self) -> int:
        return sum(n.total for n in self.need.values())

    def on(self, pool: str) -> int:
        need = self.need.get(pool)
        return need.total if need else 0

    def actual(self, buffers: dict[str, int]) -> dict[str, int]:
        """The runtime's buffers (llama.cpp's "vulkan0 kv", "cpu_mapped model", ...) added up
        by pool: those of this placement's device, and the host's."""
        split: dict[str, int] = {}
        device = (self.backend_device or "").lower()
        for name, size in buffers.items():
            buffer_type = name.split(" ", 1)[0]
            # CPU, CPU_Mapped, CPU_REPACK, and a GPU runtime's pinned host memory (Vulkan_Host).
            pool = self.device if device and buffer_type == device else CPU
            split[pool] = split.get(pool, 0) + size
        return split

    def answers(self, pin: Pin) -> bool:
        """Whether a model placed so serves a request that pins `pin`, or must be reloaded."""
        if pin.free or pin == self.pin:
            return True
        if pin.ctx is not None and pin.ctx > self.n_ctx_slot:
            return False
        if pin.device is not None and pin.device != self.device:
            return False
        return pin.gpu_layers is None or min(pin.gpu_layers, self.max_layers) == self.gpu_layers


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
    if pin.device is not None and pin.device not in {p.device for p in pools}:
        have = ", ".join(p.device for p in pools)
        raise BadRequest(
            f"there is no device '{pin.device}' here; the devices are {have}", "device"
        )
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
