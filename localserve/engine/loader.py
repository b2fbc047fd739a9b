"""The format-specific part of a load: size a model before it loads, then build its runtime.

The manager stays format-blind: it reserves what `estimate_load` says, then runs `load` on a
worker thread. Each format (`ModelRef.format`) adds one branch here.
"""

from __future__ import annotations

from dataclasses import dataclass

from localserve.backends.base import Backend
from localserve.engine.batcher import Batcher
from localserve.engine.errors import LoadFailed
from localserve.engine.estimate import MemoryEstimate, estimate
from localserve.engine.options import EngineOptions
from localserve.store.gguf_file import BadGGUF, read_header
from localserve.store.resolve import ModelRef


@dataclass
class LoadedRuntime:
    backend: Backend
    batcher: Batcher
    # What the runtime says it allocated, by kind, when it says (llama.cpp's buffer lines).
    reported_bytes: int


def estimate_load(ref: ModelRef, opts: EngineOptions) -> MemoryEstimate:
    """What the model will take once loaded; refuses a file the runtime must never see."""
    if ref.format == "onnx":
        return _estimate_onnx(ref, opts)
    if ref.format != "gguf":
        raise LoadFailed(f"cannot load '{ref.name}': unsupported model format '{ref.format}'")
    try:
        header = read_header(ref.path)
    except BadGGUF as exc:
        raise LoadFailed(f"cannot load '{ref.name}' from {ref.path}: {exc}") from None
    except OSError as exc:
        raise LoadFailed(f"cannot read '{ref.name}' at {ref.path}: {exc}") from None
    return estimate(
        header, opts.n_slots, opts.n_ctx_slot, opts.step_tokens,
        prompt_cache_limit=opts.prompt_cache_bytes,
    )


def load(ref: ModelRef, opts: EngineOptions, need: MemoryEstimate) -> LoadedRuntime:
    """Build the backend and its batcher (blocking: call on a worker thread); `need` is what
    estimate_load reserved for it."""
    if ref.format == "onnx":
        return _load_onnx(ref, opts)
    # Imported here so that a format's runtime is only imported when such a model loads.
    from localserve.backends.llama_cpp import LlamaCppBackend, LlamaCppOptions
    from localserve.engine.prompt_cache import PromptCache
    from localserve.engine.scheduler import Scheduler

    backend_opts = LlamaCppOptions(
        n_slots=opts.n_slots,
        n_ctx_slot=opts.n_ctx_slot,
        n_batch=opts.step_tokens,
        **({"n_threads": opts.n_threads} if opts.n_threads > 0 else {}),
    )
    backend = LlamaCppBackend(ref.name, ref.path, backend_opts)
    cache = PromptCache(need.prompt_cache) if need.prompt_cache > 0 else None
    scheduler = Scheduler(
        backend, max_waiting=opts.max_waiting, step_tokens=opts.step_tokens, prompt_cache=cache
    )
    return LoadedRuntime(backend, scheduler, sum(backend.buffers.values()))


def _estimate_onnx(ref: ModelRef, opts: EngineOptions) -> MemoryEstimate:
    from localserve.backends.onnx_folder import read_folder
    from localserve.backends.onnx_genai import provider_for_estimate
    from localserve.engine.onnx_estimate import estimate_onnx

    folder = read_folder(ref.path)
    max_length = min(opts.n_ctx_slot, folder.context_length)
    return estimate_onnx(
        folder, provider_for_estimate(folder), opts.n_slots, max_length, opts.step_tokens
    )


def _load_onnx(ref: ModelRef, opts: EngineOptions) -> LoadedRuntime:
    from localserve.backends.onnx_genai import OnnxGenaiBackend, OnnxOptions
    from localserve.engine.onnx_batcher import BatchPolicy, OnnxBatcher

    backend = OnnxGenaiBackend(
        ref.name,
        ref.path,
        OnnxOptions(max_batch_size=opts.n_slots, max_length=opts.n_ctx_slot, n_threads=opts.n_threads),
    )
    policy = BatchPolicy(
        max_batch_size=opts.n_slots,
        max_queue_delay_ms=opts.batch_delay_ms,
        max_waiting=opts.max_waiting,
    )
    # onnxruntime-genai reports no allocation sizes: the RSS delta is the cross-check.
    return LoadedRuntime(backend, OnnxBatcher(backend, policy), 0)
