"""The loader seam: what the manager asks of the place where models run, and how a model of
each format is sized and built there.

The manager decides residency (what to load, what to evict, when); a `Loader` sizes a model
before it loads, makes it resident on a device so that it steps, and frees it again. The manager
never sees a backend being built, a device loop, or a file format. `WorkerLoader`
(engine/worker_loader.py) runs every device's models in an engine worker process of its own;
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
from localserve.engine.batcher import Batcher
from localserve.engine.resident import ResidentModel
from localserve.formats import BadModelFile, MemoryEstimate
from localserve.formats.gguf import check_gguf
from localserve.formats.gguf import estimate as estimate_gguf
from localserve.formats.onnx import estimate_onnx, read_folder
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

    def estimate(self, ref: ModelRef) -> MemoryEstimate:
        """What the model will take once loaded; raises LoadFailed for a file the runtime must
        never see."""
        ...

    def load(self, ref: ModelRef, need: MemoryEstimate) -> ResidentModel:
        """Build the model and start stepping it on its device; `need` is what was reserved."""
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
    reported_bytes: int


def build_model(
    ref: ModelRef, s: Settings, prompt_cache_bytes: int, use_extra_bufts: bool
) -> Built:
    """Make the model (blocking: seconds). Runs where the kernels run: in the engine worker."""
    with _refused_as_load_failure(ref):  # a file changed since its estimate read it
        return _runtime(ref).build(ref, s, prompt_cache_bytes, use_extra_bufts)


def estimate_load(ref: ModelRef, s: Settings) -> MemoryEstimate:
    """What the model will take once loaded with these settings; refuses a broken file.

    The figure the manager reserves: a test or benchmark that sizes a budget calls this too.
    """
    with _refused_as_load_failure(ref):
        return _runtime(ref).estimate(ref, s)


@contextmanager
def _refused_as_load_failure(ref: ModelRef) -> Iterator[None]:
    """A model file the format refuses fails the load: the runtime never sees it."""
    try:
        yield
    except BadModelFile as exc:
        raise LoadFailed(f"cannot load '{ref.name}': {exc}") from None


def _estimate_gguf(ref: ModelRef, s: Settings) -> MemoryEstimate:
    return estimate_gguf(
        check_gguf(ref.path),
        n_slots=s.parallel,
        n_ctx_slot=s.ctx,
        n_ubatch=s.step_tokens,
        prompt_cache_limit=s.prompt_cache,
        # The backend leaves llama.cpp's swa_full at its default, on: full-size window caches.
        swa_full=True,
    )


def _load_gguf(ref: ModelRef, s: Settings, prompt_cache_bytes: int, extra_bufts: bool) -> Built:
    # Imported here so that a format's runtime is only imported when such a model loads.
    from localserve.backends.llama_cpp import LlamaCppBackend, LlamaCppOptions, usable_cores
    from localserve.engine.prompt_cache import PromptCache
    from localserve.engine.scheduler import Scheduler

    backend_opts = LlamaCppOptions(
        n_slots=s.parallel,
        n_ctx_slot=s.ctx,
        n_batch=s.step_tokens,
        n_threads=s.threads or usable_cores(),
        use_extra_bufts=extra_bufts,
    )
    backend = LlamaCppBackend(ref.name, ref.path, backend_opts)
    cache = PromptCache(prompt_cache_bytes) if prompt_cache_bytes > 0 else None
    scheduler = Scheduler(
        backend, max_waiting=s.max_queue, step_tokens=s.step_tokens, prompt_cache=cache
    )
    # What llama.cpp says it allocated, from its own "buffer size" log lines.
    return Built(backend, scheduler, sum(backend.buffers.values()))


def _estimate_onnx(ref: ModelRef, s: Settings) -> MemoryEstimate:
    from localserve.backends.onnx_genai import provider_for_estimate

    folder = read_folder(ref.path)
    max_length = min(s.ctx, folder.context_length)
    return estimate_onnx(folder, provider_for_estimate(folder), s.parallel, max_length, s.step_tokens)


def _load_onnx(ref: ModelRef, s: Settings, prompt_cache_bytes: int, extra_bufts: bool) -> Built:
    from localserve.backends.onnx_genai import OnnxGenaiBackend, OnnxOptions
    from localserve.engine.onnx_batcher import BatchPolicy, OnnxBatcher

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
    return Built(backend, OnnxBatcher(backend, policy), 0)


@dataclass(frozen=True)
class _Runtime:
    """What the loader does for one model format: size a model, then build it."""

    estimate: Callable[[ModelRef, Settings], MemoryEstimate]
    # (ref, settings, prompt cache bytes, llama.cpp's extra buffer types) -> the model.
    build: Callable[[ModelRef, Settings, int, bool], Built]


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
