"""The loader seam: what the manager asks of the place where models run, and how a model of
each format is sized before it loads.

The manager decides residency (what to load, what to evict, when); a `Loader` sizes a model
before it loads, makes it resident on a device so that it steps, and frees it again. The manager
never sees a backend being built, a device loop, or a file format. `WorkerLoader`
(engine/worker_client/supervisor.py) runs every device's models in an engine worker process of its
own; inside the worker, `build_model` (engine/worker_process/runtimes.py) makes them. Tests hand the
manager a fake loader, so every residency rule runs in milliseconds.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Protocol

from localserve.engine.residency.placement import Placement
from localserve.engine.worker_client.resident import ResidentModel
from localserve.formats import MemoryEstimate
from localserve.formats.errors import refused_as_load_failure
from localserve.formats.gguf import check_gguf, layered
from localserve.formats.gguf_header import GGUFHeader
from localserve.formats.offload import LayeredEstimate, unsplit
from localserve.formats.onnx import estimate_onnx, provider_for_estimate, read_folder
from localserve.ground import kv_cache
from localserve.ground.errors import LoadFailed
from localserve.ground.model import ModelRef
from localserve.ground.settings import Settings
from localserve.ground.units import F16

if TYPE_CHECKING:
    from localserve.engine.residency.pools import MemoryPool

log = logging.getLogger(__name__)

# An automatic context is never below this (or below the trained context, when that is less):
# Ollama's default num_ctx, and what the project served by default before contexts were fitted.
MIN_AUTO_CTX = 4096
CTX_STEP = 256  # llama.cpp pads a context to 256 cells
FIT_SHARE = 2

# Called on the event loop when a device's models are gone at once (its worker died): their
# names and why, so the manager drops them and gives their memory back.
LostModels = Callable[[list[str], str], None]


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


def layered_estimate(ref: ModelRef, s: Settings, room: int | None = None) -> LayeredEstimate:
    """What the model will take once loaded with these settings, by layer; refuses a broken
    file. Placement splits it between the CPU and a device. With an automatic context (`ctx`
    0), a GGUF model's is fitted to `room` bytes (None: its trained context, whole)."""
    with refused_as_load_failure(ref.name):
        return _estimate(ref)(ref, s, room)


def estimate_load(ref: ModelRef, s: Settings) -> MemoryEstimate:
    """What the model takes loaded all on the CPU: the figure a CPU-only daemon reserves, which
    a test or benchmark that sizes a budget uses too."""
    return layered_estimate(ref, s).whole


def _estimate_gguf(ref: ModelRef, s: Settings, room: int | None) -> LayeredEstimate:
    header = check_gguf(ref.path)
    kv = kv_cache.element_bytes(s, ref.name)
    ctx = s.ctx or fitted_ctx(header, s, room, kv)
    estimate = _layered_gguf(header, s, ctx, s.prompt_cache, kv)
    if ref.draft is None:
        return estimate
    # The draft has slots like its model's, its cache of the same type, and no prompt cache.
    return replace(estimate, draft=_layered_gguf(check_gguf(ref.draft.path), s, ctx, 0, kv))


def _layered_gguf(
    header: GGUFHeader, s: Settings, ctx: int, prompt_cache: int, kv: float
) -> LayeredEstimate:
    return layered(
        header,
        n_slots=s.parallel,
        n_ctx_slot=ctx,
        n_ubatch=s.step_tokens,
        prompt_cache_limit=prompt_cache,
        kv_element_bytes=kv,
        # The backend leaves llama.cpp's swa_full at its default, on: full-size window caches.
        swa_full=True,
    )


def fitted_ctx(header: GGUFHeader, s: Settings, room: int | None, kv: float = F16) -> int:
    """An automatic context per slot, as llama.cpp's `--fit` and Lemonade's `ctx_size=-1`
    choose one: the model's trained context, or as much of it as `room` bytes hold with every
    slot (multiples of CTX_STEP), and never less than MIN_AUTO_CTX (or the trained context, if
    that is less), whatever the room: a model that cannot take that much does not fit at all."""
    trained = int(header.arch_value("context_length", 0) or 0) or MIN_AUTO_CTX
    least = min(MIN_AUTO_CTX, trained)

    def fits(ctx: int) -> bool:
        return room is None or _layered_gguf(header, s, ctx, s.prompt_cache, kv).whole.total <= room

    if fits(trained):
        return trained
    lo, hi = least, trained  # fits(lo) or lo is the floor; not fits(hi)
    while hi - lo > CTX_STEP:
        mid = (lo + hi) // 2 // CTX_STEP * CTX_STEP
        lo, hi = (mid, hi) if fits(mid) else (lo, mid)
    return lo


def _estimate_onnx(ref: ModelRef, s: Settings, room: int | None) -> LayeredEstimate:
    folder = read_folder(ref.path)
    max_length = min(s.ctx or folder.context_length, folder.context_length)
    provider = provider_for_estimate(folder)
    estimate = estimate_onnx(folder, provider, s.parallel, max_length, s.step_tokens)
    return replace(unsplit(estimate), n_ctx_slot=max_length)


# One entry per format of localserve.formats.FORMATS that the engine can run; the worker builds
# them (engine/worker_process/runtimes.py).
_ESTIMATES: dict[str, Callable[[ModelRef, Settings, int | None], LayeredEstimate]] = {
    "gguf": _estimate_gguf,
    "onnx": _estimate_onnx,
}


def _estimate(ref: ModelRef) -> Callable[[ModelRef, Settings, int | None], LayeredEstimate]:
    estimate = _ESTIMATES.get(ref.format)
    if estimate is None:
        raise LoadFailed(f"cannot load '{ref.name}': unsupported model format '{ref.format}'")
    return estimate
