"""The loader seam: what the manager asks of the place where models run.

The manager decides residency (what to load, what to evict, when); a `Loader` sizes a model
before it loads, makes it resident on a device so that it steps, and frees it again. The manager
never sees a backend being built, a device loop, or a file format. `DeviceLoader` runs models
in this process, on one engine thread per device; a loader over worker processes keeps the same
four calls. Tests hand the manager a fake loader, so every residency rule runs in milliseconds.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Protocol

import psutil

from localserve.backends.base import Backend
from localserve.engine.batcher import Batcher
from localserve.engine.device_loop import DeviceLoop
from localserve.engine.resident import ResidentModel
from localserve.formats import BadModelFile, MemoryEstimate
from localserve.formats.gguf import check_gguf
from localserve.formats.gguf import estimate as estimate_gguf
from localserve.formats.onnx import estimate_onnx, read_folder
from localserve.ground.errors import LoadFailed
from localserve.ground.model import ModelRef
from localserve.ground.settings import Settings

log = logging.getLogger(__name__)


class Loader(Protocol):
    """Where models run. Every call blocks: the manager makes them on a worker thread."""

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


class DeviceLoader:
    """Models in this process, every one of them on the CPU's engine loop."""

    device = "cpu"

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self._loop = DeviceLoop(self.device)
        self._loop.start()
        self._loaded: list[ResidentModel] = []

    def estimate(self, ref: ModelRef) -> MemoryEstimate:
        return estimate_load(ref, self.settings)

    def load(self, ref: ModelRef, need: MemoryEstimate) -> ResidentModel:
        rss_before = psutil.Process().memory_info().rss
        t0 = time.perf_counter()
        with _refused_as_load_failure(ref):  # a file changed since its estimate read it
            backend, batcher, reported = _runtime(ref).build(ref, self.settings, need)
        model = ResidentModel(backend, batcher, device=self.device)
        model.load_seconds = time.perf_counter() - t0
        model.estimate = need
        model.actual_bytes = reported
        model.rss_delta = psutil.Process().memory_info().rss - rss_before
        self._loop.add(batcher)
        self._loaded.append(model)
        return model

    def unload(self, model: ResidentModel) -> None:
        self._loop.remove(model.batcher)  # waits for a step in progress to end
        model.backend.close()
        if model in self._loaded:
            self._loaded.remove(model)

    def close(self) -> None:
        self._loop.stop()
        for model in self._loaded:
            model.backend.close()
        self._loaded.clear()


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


def _load_gguf(
    ref: ModelRef, s: Settings, need: MemoryEstimate
) -> tuple[Backend, Batcher, int]:
    # Imported here so that a format's runtime is only imported when such a model loads.
    from localserve.backends.llama_cpp import LlamaCppBackend, LlamaCppOptions, usable_cores
    from localserve.engine.prompt_cache import PromptCache
    from localserve.engine.scheduler import Scheduler

    backend_opts = LlamaCppOptions(
        n_slots=s.parallel,
        n_ctx_slot=s.ctx,
        n_batch=s.step_tokens,
        n_threads=s.threads or usable_cores(),
    )
    backend = LlamaCppBackend(ref.name, ref.path, backend_opts)
    cache = PromptCache(need.prompt_cache) if need.prompt_cache > 0 else None
    scheduler = Scheduler(
        backend, max_waiting=s.max_queue, step_tokens=s.step_tokens, prompt_cache=cache
    )
    # What llama.cpp says it allocated, from its own "buffer size" log lines.
    return backend, scheduler, sum(backend.buffers.values())


def _estimate_onnx(ref: ModelRef, s: Settings) -> MemoryEstimate:
    from localserve.backends.onnx_genai import provider_for_estimate

    folder = read_folder(ref.path)
    max_length = min(s.ctx, folder.context_length)
    return estimate_onnx(folder, provider_for_estimate(folder), s.parallel, max_length, s.step_tokens)


def _load_onnx(ref: ModelRef, s: Settings) -> tuple[Backend, Batcher, int]:
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
    return backend, OnnxBatcher(backend, policy), 0


@dataclass(frozen=True)
class _Runtime:
    """What the loader does for one model format: size a model, then build it."""

    estimate: Callable[[ModelRef, Settings], MemoryEstimate]
    build: Callable[[ModelRef, Settings, MemoryEstimate], tuple[Backend, Batcher, int]]


# One entry per format of localserve.formats.FORMATS that this loader can run.
_RUNTIMES: dict[str, _Runtime] = {
    "gguf": _Runtime(_estimate_gguf, _load_gguf),
    "onnx": _Runtime(_estimate_onnx, lambda ref, s, need: _load_onnx(ref, s)),
}


def _runtime(ref: ModelRef) -> _Runtime:
    runtime = _RUNTIMES.get(ref.format)
    if runtime is None:
        raise LoadFailed(f"cannot load '{ref.name}': unsupported model format '{ref.format}'")
    return runtime
