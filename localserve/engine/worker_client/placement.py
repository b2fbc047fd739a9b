"""What a load carries out: the device whose engine worker runs the model, the layers that
device holds, and what the model reserved in each memory pool. Residency decides it
(engine/residency/placement.py's `place`); the supervisor hands it to the worker as it is."""

from __future__ import annotations

from dataclasses import dataclass, field

from localserve.formats import MemoryEstimate
from localserve.ground.pin import AUTO, CPU, Pin


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
