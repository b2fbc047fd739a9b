"""A request's or the operator's say in where a model runs: plain data that the faces decode
(Ollama's `num_gpu` and `num_ctx`, the admin API's load), residency places a model by
(engine/residency/placement.py), and a model's placement remembers."""

from __future__ import annotations

from dataclasses import dataclass, replace

# The CPU's name as a device: its memory pool, its engine worker, a pin's `device`.
CPU = "cpu"


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
