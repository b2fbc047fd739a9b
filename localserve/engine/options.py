"""How every model is sized and queued, and how residency is governed: the daemon's knobs."""

from __future__ import annotations

from dataclasses import dataclass

from localserve.engine.estimate import DEFAULT_PROMPT_CACHE
from localserve.engine.keep_alive import DEFAULT_KEEP_ALIVE


@dataclass(frozen=True)
class EngineOptions:
    """How every model is sized and queued, and how residency is governed."""

    n_slots: int = 4
    n_ctx_slot: int = 4096
    n_threads: int = 0
    step_tokens: int = 512
    max_waiting: int = 64
    # Bytes of saved slot contents each GGUF model may keep (engine/prompt_cache.py); 0: none.
    prompt_cache_bytes: int = DEFAULT_PROMPT_CACHE
    memory_budget: int | None = None
    max_loaded_models: int = 0
    keep_alive_s: float | None = DEFAULT_KEEP_ALIVE
    max_pass_over_s: float = 10.0
    load_timeout_s: float = 120.0
    # ONNX models batch statically: how long an idle model waits for a batch to fill.
    batch_delay_ms: float = 10.0
    # The model store's folder; None: LOCALSERVE_MODELS, else the user data folder.
    models_dir: str | None = None
