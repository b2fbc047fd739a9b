"""The one owner of model residency: which models are loaded, and on which device's loop.

This first cut loads the models named at start-up and serves them; eviction, budgets and
keep-alive build on the same `acquire` path.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

from localserve.backends.llama_cpp import LlamaCppBackend, LlamaCppOptions
from localserve.engine.device_loop import DeviceLoop
from localserve.engine.errors import ModelNotFound
from localserve.engine.resident import ResidentModel
from localserve.engine.scheduler import Scheduler
from localserve.store.resolve import ModelRef, canonical_name, resolve

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class EngineOptions:
    """How every model is sized and queued."""

    n_slots: int = 4
    n_ctx_slot: int = 4096
    n_threads: int = 0
    step_tokens: int = 512
    max_waiting: int = 64


class ModelManager:
    """Loads models, hands them to requests, and owns the device loops that step them."""

    def __init__(self, options: EngineOptions) -> None:
        self.options = options
        self._models: dict[str, ResidentModel] = {}
        self._in_flight: dict[str, int] = {}
        self._cpu = DeviceLoop("cpu")
        self._cpu.start()

    @property
    def models(self) -> list[ResidentModel]:
        return list(self._models.values())

    async def load(self, name_or_path: str) -> ResidentModel:
        """Load a model by catalog name or file path, off the event loop."""
        ref = resolve(name_or_path)
        if ref.name in self._models:
            return self._models[ref.name]
        loop = asyncio.get_running_loop()
        model = await loop.run_in_executor(None, self._load_blocking, ref)
        self._models[ref.name] = model
        self._cpu.add(model.scheduler)
        log.info("loaded %s from %s", ref.name, ref.path)
        return model

    def _load_blocking(self, ref: ModelRef) -> ResidentModel:
        opts = self.options
        backend_opts = LlamaCppOptions(
            n_slots=opts.n_slots,
            n_ctx_slot=opts.n_ctx_slot,
            n_batch=opts.step_tokens,
            **({"n_threads": opts.n_threads} if opts.n_threads > 0 else {}),
        )
        backend = LlamaCppBackend(ref.name, ref.path, backend_opts)
        scheduler = Scheduler(backend, max_waiting=opts.max_waiting, step_tokens=opts.step_tokens)
        return ResidentModel(backend, scheduler, device="cpu")

    def get(self, name: str) -> ResidentModel:
        model = self._models.get(canonical_name(name))
        if model is None:
            raise ModelNotFound(name)
        return model

    @asynccontextmanager
    async def acquire(self, name: str) -> AsyncIterator[ResidentModel]:
        """Hold a model for the length of one request; counts it as in flight."""
        model = self.get(name)
        self._in_flight[model.name] = self._in_flight.get(model.name, 0) + 1
        try:
            yield model
        finally:
            self._in_flight[model.name] -= 1

    def in_flight(self, name: str) -> int:
        return self._in_flight.get(name, 0)

    def close(self) -> None:
        self._cpu.stop()
        for model in self._models.values():
            model.backend.close()
        self._models.clear()
