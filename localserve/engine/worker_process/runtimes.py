"""How the engine worker makes a model of each format: its backend and its batcher, on the
worker's device (blocking: seconds). The daemon only sizes models (engine/worker_client/sizing.py).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from localserve.backends.base import Backend
from localserve.engine.batching.batcher import Batcher
from localserve.engine.batching.saved_conversations import SavedConversations
from localserve.formats.errors import refused_as_load_failure
from localserve.ground import kv_cache
from localserve.ground import messages as m
from localserve.ground.errors import LoadFailed
from localserve.ground.places import saved_conversations_dir
from localserve.ground.settings import Settings

if TYPE_CHECKING:
    from localserve.backends.llama_cpp import LlamaCppOptions

log = logging.getLogger(__name__)


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
    """Make the model. Runs where the kernels run: in the engine worker."""
    build = _BUILDERS.get(load.model.format)
    if build is None:
        raise LoadFailed(
            f"cannot load '{load.model.name}': unsupported model format '{load.model.format}'"
        )
    with refused_as_load_failure(load.model.name):  # a file changed since its estimate read it
        return build(s, load)


def _load_gguf(s: Settings, load: m.Load) -> Built:
    # Imported here so that a format's runtime is only imported when such a model loads.
    from localserve.backends.llama_cpp import LlamaCppBackend, LlamaCppOptions
    from localserve.backends.llama_runtime import usable_cores
    from localserve.engine.batching.draft_model import DraftModel
    from localserve.engine.batching.prompt_cache import PromptCache
    from localserve.engine.batching.scheduler import Scheduler

    backend_opts = LlamaCppOptions(
        n_slots=s.parallel,
        n_ctx_slot=load.n_ctx_slot or s.ctx,
        n_batch=s.step_tokens,
        n_threads=s.threads or usable_cores(),
        use_extra_bufts=load.use_extra_bufts,
        gpu_layers=load.gpu_layers,
        device=load.device,
        draft_path=load.model.draft.path if load.model.draft else None,
        kv_type=kv_cache.cache_type(s, load.model.name),
        flash_attention=kv_cache.flash_attention(s, load.model.name),
    )
    backend = LlamaCppBackend(load.model.name, load.model.path, backend_opts)
    cache = None
    if load.prompt_cache_bytes > 0:
        cache = PromptCache(load.prompt_cache_bytes, _saved_conversations(s, load, backend_opts))
    scheduler = Scheduler(
        backend,
        max_waiting=s.max_queue,
        step_tokens=s.step_tokens,
        prompt_cache=cache,
        draft_tokens=s.speculative,
        background_share=s.background_share,
        draft_model=DraftModel(backend.draft, s.step_tokens) if backend.draft else None,
    )
    # What llama.cpp says it allocated, from its own "buffer size" log lines.
    return Built(backend, scheduler, backend.buffers)


def _saved_conversations(
    s: Settings, load: m.Load, opts: LlamaCppOptions
) -> SavedConversations | None:
    """This model's conversations on disk: kept per file and per everything that shapes a
    slot's cells (a state from another configuration would be refused, or worse, taken)."""
    if s.saved_conversations <= 0:
        return None
    import llama_cpp

    config = (
        f"{llama_cpp.__version__}:{opts.n_slots}:{opts.n_ctx_slot}:{opts.kv_unified}"
        # A slot's cells in one cache type mean nothing in another.
        + (f":{opts.kv_type}" if opts.kv_type != "f16" else "")
    )
    try:
        return SavedConversations(
            saved_conversations_dir(), load.model.path, config, s.saved_conversations
        )
    except OSError as exc:  # an unreadable state folder costs prefills, never the load
        log.warning("conversations of %s are not saved: %s", load.model.name, exc)
        return None


def _load_onnx(s: Settings, load: m.Load) -> Built:
    ref = load.model
    from localserve.backends.onnx_genai import OnnxGenaiBackend, OnnxOptions
    from localserve.engine.batching.onnx_batcher import BatchPolicy, OnnxBatcher

    backend = OnnxGenaiBackend(
        ref.name,
        ref.path,
        OnnxOptions(
            max_batch_size=s.parallel, max_length=load.n_ctx_slot or s.ctx, n_threads=s.threads
        ),
    )
    policy = BatchPolicy(
        max_batch_size=s.parallel,
        max_queue_delay_ms=s.batch_delay_ms,
        max_waiting=s.max_queue,
    )
    if (ignored := kv_cache.not_applied(s, ref.name, backend.info.kv_cache_type)) is not None:
        log.warning("%s", ignored)
    # onnxruntime-genai reports no allocation sizes: the RSS delta is the cross-check.
    return Built(backend, OnnxBatcher(backend, policy), {})


_BUILDERS: dict[str, Callable[[Settings, m.Load], Built]] = {"gguf": _load_gguf, "onnx": _load_onnx}
