"""The loader seam: what the manager asks of the place where models run, and how a model of
each format is sized and built there.

The manager decides residency (what to load, what to evict, when); a `Loader` sizes a model
before it loads, makes it resident on a device so that it steps, and frees it again. The manager
never sees a backend being built, a device loop, or a file format. `WorkerLoader`
(engine/workers/supervisor.py) runs every device's models in an engine worker process of its own;
inside the worker, `build_model` makes a model from the table below. Tests hand the manager a
fake loader, so every residency rule runs in milliseconds.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Protocol

from localserve.backends.base import Backend
from localserve.engine.batching.batcher import Batcher
from localserve.engine.workers.resident import ResidentModel
from localserve.formats import BadModelFile, MemoryEstimate
from localserve.engine.residency.placement import Placement
from localserve.formats.gguf import check_gguf, layered
from localserve.formats.offload import LayeredEstimate, unsplit
from localserve.formats.onnx import estimate_onnx, read_folder
from localserve.ground import messages as m
from localserve.ground.errors import LoadFailed
from localserve.ground.model import ModelRef
from localserve.ground.settings import Settings

log = logging.getLogger(__name__)

# Called on the event loop when a device's models are gone at once (its worker died): their
# names and why, so the manager drops them and gives their memory back.
LostModels = Callable[[list[str], str], None]


class Loader(Protocol):
    """Where models run. Every call but `on_lost` blocks: the manager makes them on a worker
    thread."""

    def estimate(self, ref: ModelRef) -> LayeredEstimate:
        """What the model will take once loaded, by layer; raises LoadFailed for a file the
        runtime must never see."""
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


@dataclass
class Built:
    """A model made on its device: its backend, its batcher, and the bytes its runtime says it
    allocated (llama.cpp's "buffer size" lines; 0 where the runtime does not say)."""

    backend: Backend
    batcher: Batcher
    buffers: dict[str, int]  # by name, in bytes

    @property
    def reported_bytes(self) -> int:
        return sum(self.buffers.values())


def build_model(s: Settings, load: m.Load) -> Built:
    """Make the model (blocking: seconds). Runs where the kernels run: in the engine worker."""
    with _refused_as_load_failure(load.model):  # a file changed since its estimate read it
        return _runtime(load.model).build(s, load)


def layered_estimate(ref: ModelRef, s: Settings) -> LayeredEstimate:
    """What the model will take once loaded with these settings, by layer; refuses a broken
    file. Placement splits it between the CPU and a device."""
    with _refused_as_load_failure(ref):
        return _runtime(ref).estimate(ref, s)


def estimate_load(ref: ModelRef, s: Settings) -> MemoryEstimate:
    """What the model takes loaded all on the CPU: the figure a CPU-only daemon reserves, which
    a test or benchmark that sizes a budget uses too."""
    return layered_estimate(ref, s).whole


@contextmanager
def _refused_as_load_failure(ref: ModelRef) -> Iterator[None]:
    """A model file the format refuses fails the load: the runtime never sees it."""
    try:
        yield
    except BadModelFile as exc:
        raise LoadFailed(f"cannot load '{ref.name}': {exc}") from None


def _estimate_gguf(ref: ModelRef, s: Settings) -> LayeredEstimate:
    return layered(
        check_gguf(ref.path),
        n_slots=s.parallel,
        n_ctx_slot=s.ctx,
        n_ubatch=s.step_tokens,
        prompt_cache_limit=s.prompt_cache,
        # The backend leaves llama.cpp's swa_full at its default, on: full-size window caches.
        swa_full=True,
    )


def _load_gguf(s: Settings, load: m.Load) -> Built:
    # Imported here so that a format's runtime is only imported when such a model loads.
    from localserve.backends.llama_cpp import LlamaCppBackend, LlamaCppOptions
    from localserve.backends.llama_runtime import usable_cores
    from localserve.engine.batching.prompt_cache import PromptCache
    from localserve.engine.batching.scheduler import Scheduler

    backend_opts = LlamaCppOptions(
        n_slots=s.parallel,
        n_ctx_slot=s.ctx,
        n_batch=s.step_tokens,
        n_threads=s.threads or usable_cores(),
        use_extra_bufts=load.use_extra_bufts,
        gpu_layers=load.gpu_layers,
        device=load.device,
    )
    backend = LlamaCppBackend(load.model.name, load.model.path, backend_opts)
    cache = PromptCache(load.prompt_cache_bytes) if load.prompt_cache_bytes > 0 else None
    scheduler = Scheduler(
        backend, max_waiting=s.max_queue, step_tokens=s.step_tokens, prompt_cache=cache
    )
    # What llama.cpp says it allocated, from its own "buffer size" log lines.
    return Built(backend, scheduler, backend.buffers)


def _estimate_onnx(ref: ModelRef, s: Settings) -> LayeredEstimate:
    from localserve.backends.onnx_genai import provider_for_estimate

    folder = read_folder(ref.path)
    max_length = min(s.ctx, folder.context_length)
    provider = provider_for_estimate(folder)
    return unsplit(estimate_onnx(folder, provider, s.parallel, max_length, s.step_tokens))


def _load_onnx(s: Settings, load: m.Load) -> Built:
    ref = load.model
    from localserve.backends.onnx_genai import OnnxGenaiBackend, OnnxOptions
    from localserve.engine.batching.onnx_batcher import BatchPolicy, OnnxBatcher

    backend = OnnxGenaiBackend(
        ref.name,
        ref.path,
        OnnxOptions(max_batch_size=s.parallel, max_length=s.ctx, n_threads=s.threads),
    )
    policy = BatchPolicy(
        max_batch_size=s.parallel,
        max_queue_delay_ms=s.batch_delay_ms,
        max_waiting=s.max_queue,
    )
    # onnxruntime-genai reports no allocation sizes: the RSS delta is the cross-check.
    return Built(backend, OnnxBatcher(backend, policy), {})


@dataclass(frozen=True)
class _Runtime:
    """What the loader does for one model format: size a model, then build it."""

    estimate: Callable[[ModelRef, Settings], LayeredEstimate]
    build: Callable[[Settings, m.Load], Built]


# One entry per format of localserve.formats.FORMATS that this loader can run.
_RUNTIMES: dict[str, _Runtime] = {
    "gguf": _Runtime(_estimate_gguf, _load_gguf),
    "onnx": _Runtime(_estimate_onnx, _load_onnx),
}


def _runtime(ref: ModelRef) -> _Runtime:
    runtime = _RUNTIMES.get(ref.format)
    if runtime is None:
        raise LoadFailed(f"cannot load '{ref.name}': unsupported model format '{ref.format}'")
    return runtime
