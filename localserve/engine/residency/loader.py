"""The loader seam: what the manager asks of the place where models run.

The manager decides residency (what to load, what to evict, when); a `Loader` sizes a model
before it loads, makes it resident on a device so that it steps, and frees it again. The manager
never sees a backend being built, a device loop, or a file format. `WorkerLoader`
(engine/worker_client/supervisor.py) runs every device's models in an engine worker process of
its own and sizes them by their format (engine/worker_client/sizing.py); inside the worker,
`build_model` (engine/worker_process/runtimes.py) makes them. Tests hand the manager a fake
loader, so every residency rule runs in milliseconds.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, Protocol

from localserve.engine.worker_client.placement import Placement
from localserve.engine.worker_client.resident import ResidentModel
from localserve.formats.offload import LayeredEstimate
from localserve.ground.model import ModelRef

if TYPE_CHECKING:
    from localserve.engine.residency.pools import MemoryPool
    from localserve.engine.worker_client.supervisor import LostModels

# An automatic context is fitted to this share of the largest pool's budget (see `sized`).
FIT_SHARE = 2


class ModelLibrary(Protocol):
    """What the manager asks of the store: the file a name stands for."""

    def resolve(self, name: str, allow_path: bool = False) -> ModelRef: ...


class Loader(Protocol):
    """Where models run. Every call but `on_lost` blocks: the manager makes them on a worker
    thread."""

    def estimate(self, ref: ModelRef, room: int | None = None, ctx: int = 0) -> LayeredEstimate:
        """What the model will take once loaded, by layer; raises LoadFailed for a file the
        runtime must never see. `ctx` (0: the settings') is its context per slot; with an
        automatic one, that is fitted to `room` bytes."""
        ...

    def load(self, ref: ModelRef, placement: Placement) -> ResidentModel:
        """Build the model and start stepping it on the placement's device, with its layers
        there; `placement.need` is what was reserved in each pool."""
        ...

    def unload(self, model: ResidentModel) -> None:
        """Stop stepping the model and free it; returns once its memory is really released."""
        ...

    def close(self) -> None:
        """Free every model still loaded and stop the devices."""
        ...

    def on_lost(self, callback: LostModels) -> None:
        """Take the callable to call when models are lost without an unload."""
        ...

    def health(self) -> dict[str, Any]:
        """Each device's state: running, idle, or failed and why (for /health)."""
        ...


def sized(
    loader: Loader, ref: ModelRef, pools: Iterable[MemoryPool], ctx: int | None = None
) -> LayeredEstimate:
    """The loader's estimate at `ctx` if given, else with an automatic context fitted to
    1/FIT_SHARE of the largest pool's budget: room for the model's slots, and for another
    model beside it."""
    if ctx:
        return loader.estimate(ref, None, ctx)
    return loader.estimate(ref, max((p.budget for p in pools), default=0) // FIT_SHARE)


def grown_ctx(loader: Loader, ref: ModelRef, pools: Iterable[MemoryPool], asked: int) -> int:
    """The context a request asking for `asked` tokens a slot (Ollama's num_ctx) may reload the
    model with: up to its trained context, while the model then fits the largest pool's whole
    budget; 0 where it would not."""
    ctx = min(asked, loader.estimate(ref, None).n_ctx_slot)
    budget = max((p.budget for p in pools), default=0)
    return ctx if loader.estimate(ref, None, ctx).whole.total <= budget else 0
