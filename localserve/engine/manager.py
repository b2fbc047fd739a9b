"""The one owner of model residency: what is loaded, what is evicted, and when.

Requests `acquire` a model by name. A model that is not resident is loaded once however many
requests ask (single flight), after its estimate is reserved in the device's pool. When it does
not fit, idle models are evicted least recently used first; busy and pinned ones never are.
A request that waits for busy models to drain is bounded twice: after `max_pass_over_s` the
models in its way stop admitting new requests (so a swap cannot be starved by steady traffic
to the resident model), and after `load_timeout_s` it gives up with ModelBusy.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import psutil

from localserve.engine.device_loop import DeviceLoop
from localserve.engine.errors import BadRequest, DoesNotFit, ModelBusy
from localserve.engine.estimate import MemoryEstimate
from localserve.engine.loader import estimate_load, load
from localserve.engine.options import EngineOptions
from localserve.engine.pools import format_size, system_ram_pool
from localserve.engine.resident import ResidentModel
from localserve.store.library import Library
from localserve.store.resolve import ModelRef, canonical_name

log = logging.getLogger(__name__)


class ModelManager:
    """Loads, hands out, keeps alive and evicts models; owns the device loops that step them."""

    def __init__(self, options: EngineOptions) -> None:
        self.options = options
        self.pool = system_ram_pool(options.memory_budget)
        self.library = Library(options.models_dir)
        self.load_counts: dict[str, int] = {}
        # Models first named by a file path keep answering to their name after an eviction.
        self._known: dict[str, ModelRef] = {}
        self._resident: dict[str, ResidentModel] = {}
        self._loading: dict[str, asyncio.Task[ResidentModel]] = {}
        self._waiters: dict[str, int] = {}
        self._unloading: set[str] = set()
        self._timers: dict[str, asyncio.TimerHandle] = {}
        self._changed = asyncio.Event()
        self._cpu = DeviceLoop("cpu")
        self._cpu.start()

    @property
    def models(self) -> list[ResidentModel]:
        return list(self._resident.values())

    def get(self, name: str) -> ResidentModel | None:
        return self._resident.get(canonical_name(name))

    # -- the request path ----------------------------------------------------------------------

    @asynccontextmanager
    async def acquire(
        self, name: str, keep_alive_s: float | None | bool = False
    ) -> AsyncIterator[ResidentModel]:
        """Hold a resident model for one request. `keep_alive_s` (if not False) overrides how
        long the model stays after this request: seconds, None for ever, 0 to unload at once."""
        model = await self.ensure(name)
        model.in_flight += 1
        self._cancel_timer(model.name)
        try:
            yield model
        finally:
            model.in_flight -= 1
            model.last_used = time.monotonic()
            if keep_alive_s is not False:
                model.keep_alive_s = keep_alive_s  # type: ignore[assignment]
            self._after_use(model)

    async def ensure(self, name: str, allow_path: bool = False) -> ResidentModel:
        """The model, resident: loaded now if it must be, by one load however many ask.

        Only the operator (`serve --model`, the admin load) may name a file path; a client of
        the OpenAI or Ollama face names a model, and a name never holds a separator.
        """
        ref = self._known.get(canonical_name(name)) or await self._resolve(name, allow_path)
        self._known[ref.name] = ref
        started = time.monotonic()
        while True:
            model = self._resident.get(ref.name)
            if model is not None and not model.draining:
                return model
            if model is not None:  # draining for another model's swap: wait our turn
                await self._wait_for_change(started, ref.name)
                continue
            task = self._loading.get(ref.name) or self._start_load(ref, started)
            self._waiters[ref.name] = self._waiters.get(ref.name, 0) + 1
            try:
                # Shielded: a client that leaves must not cancel the load others wait on.
                return await asyncio.shield(task)
            finally:
                self._waiters[ref.name] -= 1

    async def _resolve(self, name: str, allow_path: bool) -> ModelRef:
        if not allow_path and ("/" in name or "\\" in name):
            raise BadRequest(
                f"'{name}' is not a model name: names hold no '/'; to serve a file, start the "
                "daemon with `localserve serve --model PATH` or import it into the store", "model")
        # Resolving may read manifests and lay out an ONNX folder: keep it off the event loop.
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(None, self.library.resolve, name, allow_path)

    def _start_load(self, ref: ModelRef, started: float) -> asyncio.Task[ResidentModel]:
        task = asyncio.get_running_loop().create_task(self._load_task(ref, started))
        task.add_done_callback(lambda t: t.cancelled() or t.exception())
        self._loading[ref.name] = task
        return task

    async def _load_task(self, ref: ModelRef, started: float) -> ResidentModel:
        try:
            model = await self._load(ref, started)
        finally:
            del self._loading[ref.name]
            self._notify()
        if not self._waiters.get(ref.name):
            self._after_use(model)  # every requester left: its keep-alive starts now
        return model

    async def _load(self, ref: ModelRef, started: float) -> ResidentModel:
        loop = asyncio.get_running_loop()
        opts = self.options
        need = await loop.run_in_executor(None, estimate_load, ref, opts)
        if need.total > self.pool.budget:
            raise DoesNotFit(
                f"model '{ref.name}' needs {format_size(need.total)} but the {self.pool.device} "
                f"memory budget is {format_size(self.pool.budget)}"
            )
        await self._make_room(ref.name, need.total, started)
        self.pool.reserve(ref.name, need.total)
        try:
            model = await loop.run_in_executor(None, self._load_blocking, ref, need)
        except BaseException:
            self.pool.release(ref.name)
            raise
        self._resident[ref.name] = model
        self.load_counts[ref.name] = self.load_counts.get(ref.name, 0) + 1
        self._cpu.add(model.scheduler)
        self._notify()
        log.info(
            "loaded %s in %.2fs: estimate %s, the runtime reports %s",
            ref.name, model.load_seconds, format_size(need.total), format_size(model.actual_bytes),
        )
        return model

    def _load_blocking(self, ref: ModelRef, need: MemoryEstimate) -> ResidentModel:
        opts = self.options
        rss_before = psutil.Process().memory_info().rss
        t0 = time.perf_counter()
        runtime = load(ref, opts, need)
        model = ResidentModel(runtime.backend, runtime.batcher, device=self.pool.device)
        model.load_seconds = time.perf_counter() - t0
        model.estimate = need
        model.actual_bytes = runtime.reported_bytes
        model.rss_delta = psutil.Process().memory_info().rss - rss_before
        model.keep_alive_s = opts.keep_alive_s
        return model

    # -- making room -------------------------------------------------------------------------

    async def _make_room(self, name: str, need: int, started: float) -> None:
        in_the_way: list[ResidentModel] = []
        try:
            while not self._room_for(name, need):
                victim = self._idle_victim(name)
                if victim is not None:
                    self._start_unload(victim)
                elif time.monotonic() - started > self.options.max_pass_over_s:
                    # Stop feeding the models in the way, so they drain and can be evicted.
                    for model in self._resident.values():
                        if not model.pinned and not model.draining:
                            model.draining = True
                            in_the_way.append(model)
                await self._wait_for_change(started, name)
        finally:
            for model in in_the_way:
                model.draining = False

    def _room_for(self, name: str, need: int) -> bool:
        cap = self.options.max_loaded_models
        others = len(self._resident) + len(self._unloading) + len(self._loading) - 1
        return self.pool.fits(need) and (cap <= 0 or others < cap)

    def _idle_victim(self, name: str) -> ResidentModel | None:
        idle = [m for m in self._resident.values() if m.name != name and not m.pinned and m.idle]
        return min(idle, key=lambda m: m.last_used, default=None)

    async def _wait_for_change(self, started: float, name: str) -> None:
        remaining = self.options.load_timeout_s - (time.monotonic() - started)
        if remaining <= 0:
            others = [m for m in self._resident.values() if m.name != name]
            busy = ", ".join(m.name for m in others if not m.idle) or "none"
            pinned = ", ".join(m.name for m in others if m.pinned) or "none"
            raise ModelBusy(
                f"timed out after {self.options.load_timeout_s:.0f}s waiting for memory to load "
                f"'{name}'; busy models: {busy}; pinned models: {pinned}; memory budget "
                f"{format_size(self.pool.budget)}"
            )
        event = self._changed
        try:
            await asyncio.wait_for(event.wait(), min(remaining, 1.0))
        except asyncio.TimeoutError:
            pass

    def _notify(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()

    # -- keep-alive and unloading --------------------------------------------------------------

    def _after_use(self, model: ResidentModel) -> None:
        self._notify()
        if model.in_flight or self._resident.get(model.name) is not model:
            return
        loop = asyncio.get_running_loop()
        if not model.idle:
            # A cancelled sequence is reaped at the engine's next step: look again shortly.
            loop.call_later(0.05, self._after_use, model)
            return
        self._cancel_timer(model.name)
        ka = model.keep_alive_s
        if ka is None:
            model.expires_at = None
        elif ka <= 0:
            self._start_unload(model)
        else:
            model.expires_at = time.time() + ka
            self._timers[model.name] = loop.call_later(ka, self._expire, model)

    def _expire(self, model: ResidentModel) -> None:
        self._timers.pop(model.name, None)
        if self._resident.get(model.name) is model and model.idle and not model.in_flight:
            self._start_unload(model)
        elif self._resident.get(model.name) is model:
            self._after_use(model)  # still generating: look again when it is done

    def _cancel_timer(self, name: str) -> None:
        timer = self._timers.pop(name, None)
        if timer is not None:
            timer.cancel()

    def _start_unload(self, model: ResidentModel) -> None:
        """Evict now; the memory returns to the pool when the free has really completed."""
        name = model.name
        del self._resident[name]
        self._cancel_timer(name)
        self._unloading.add(name)
        log.info("unloading %s", name)
        loop = asyncio.get_running_loop()

        def free() -> None:
            self._cpu.remove(model.scheduler)  # waits for a step in progress to end
            model.backend.close()

        def done(_: object) -> None:
            self.pool.release(name)
            self._unloading.discard(name)
            self._notify()

        loop.run_in_executor(None, free).add_done_callback(
            lambda f: loop.call_soon_threadsafe(done, f)
        )

    async def preload(self, name: str, keep_alive_s: float | None = None) -> ResidentModel:
        """Load without a request, as `serve --model` and the admin API do (paths allowed)."""
        model = await self.ensure(name, allow_path=True)
        model.keep_alive_s = keep_alive_s
        self._after_use(model)
        return model

    def pin(self, name: str, pinned: bool) -> bool:
        model = self.get(name)
        if model is None:
            return False
        model.pinned = pinned
        self._notify()
        return True

    async def unload(self, name: str) -> bool:
        """Unload now if idle; a busy model is unloaded as soon as its requests end."""
        model = self.get(name)
        if model is None:
            return False
        model.keep_alive_s = 0
        self._after_use(model)
        return True

    def close(self) -> None:
        self._cpu.stop()
        for model in self._resident.values():
            model.backend.close()
        self._resident.clear()
