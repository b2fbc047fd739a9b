"""The one owner of model residency: what is loaded, what is evicted, and when.

Requests `acquire` a model by name (or alias). A model not resident is loaded once however many
ask (single flight), after its estimate is reserved in the device's pool. When it does not fit,
idle models are evicted least recently used first; busy and pinned ones never are. A request
that waits for busy models to drain is bounded twice: after `max_pass_over_s` the models in its
way stop admitting new requests (so a swap cannot be starved by steady traffic to the resident
model), and after `load_timeout_s` it gives up with ModelBusy. A request's options reload a
model placed otherwise, within reloads.py's bounds.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager

from localserve.engine.residency import eviction
from localserve.engine.residency.loader import Loader, ModelLibrary, sized
from localserve.engine.residency.per_model import aliased, check_name, output_cap, with_draft
from localserve.engine.residency.placement import (
    answers,
    as_it_takes_effect,
    check_budgets,
    place,
)
from localserve.engine.residency.pools import MemoryPool
from localserve.engine.residency.reloads import Reloads, deferred
from localserve.engine.residency.tally import ResidencyTally
from localserve.engine.worker_client.placement import Placement
from localserve.engine.worker_client.resident import ResidentModel
from localserve.ground.model import ModelRef
from localserve.ground.pin import AUTO, Pin
from localserve.ground.settings import Settings
from localserve.ground.units import UNSET, KeepAlive, format_size
from localserve.store.resolve import canonical_name

log = logging.getLogger(__name__)


class ModelManager:
    """Loads, hands out, keeps alive and evicts models, through its loader, within its pool."""

    def __init__(
        self,
        settings: Settings,
        loader: Loader,
        library: ModelLibrary,
        pools: Sequence[MemoryPool],
    ) -> None:
        self.settings = settings
        self.loader = loader
        self.library = library
        # In preference order: the CPU's first, then the GPUs, fastest first.
        self.pools = {pool.device: pool for pool in pools}
        self.load_counts: dict[str, int] = {}
        self.tally = ResidencyTally()
        # Every model resolved: one named by a path keeps its name, and its listing, evicted.
        self.known: dict[str, ModelRef] = {}
        self._resident: dict[str, ResidentModel] = {}
        self._loading: dict[str, asyncio.Task[ResidentModel]] = {}
        self._waiters: dict[str, int] = {}
        self._unloading: set[str] = set()
        self._in_line: list[str] = []
        self._timers: dict[str, asyncio.TimerHandle] = {}
        self._changed = asyncio.Event()
        self.reloads = Reloads(settings.reload_interval)
        loader.on_lost(self._lost)

    @property
    def models(self) -> list[ResidentModel]:
        return list(self._resident.values())

    @property
    def loading(self) -> list[str]:
        """Models being loaded now, for /health (the tray's "Loading X")."""
        return list(self._loading)

    def get(self, name: str) -> ResidentModel | None:
        return self._resident.get(canonical_name(aliased(self.settings, name)))

    # -- the request path ----------------------------------------------------------------------

    @asynccontextmanager
    async def acquire(
        self, name: str, keep_alive_s: KeepAlive = UNSET, pin: Pin = AUTO
    ) -> AsyncIterator[ResidentModel]:
        """Hold a resident model for one request. `keep_alive_s` (unless UNSET) overrides how
        long the model stays after this request: seconds, None for ever, 0 to unload at once.
        `pin` (Ollama's num_gpu) reloads a model placed otherwise, once its requests end."""
        model = await self.ensure(name, pin=pin)
        model.in_flight += 1
        self._cancel_timer(model.name)
        try:
            yield model
        finally:
            model.in_flight -= 1
            model.last_used = time.monotonic()
            if keep_alive_s is not UNSET:
                model.keep_alive_s = keep_alive_s
            self._after_use(model)

    async def ensure(self, name: str, allow_path: bool = False, pin: Pin = AUTO) -> ResidentModel:
        """The model, resident: loaded now if it must be, by one load however many ask. Only
        the operator may name a file path (per_model.py's check_name). A model resident with
        another placement than `pin` asks for is reloaded, as Ollama reloads a model for
        another num_gpu: it stops taking requests, drains, and goes (within reloads.py's
        bounds)."""
        name = aliased(self.settings, name)
        pin = as_it_takes_effect(pin, list(self.pools.values()))
        ref = self.known.get(canonical_name(name)) or await self._resolve(name, allow_path)
        self.known[ref.name] = ref
        started = drain_from = time.monotonic()
        reloading: ResidentModel | None = None
        try:
            while True:
                model = self._resident.get(ref.name)
                if model is not None and not answers(model.placement, pin):
                    if model is not reloading:  # reloads.py: at most one an interval
                        if not self.reloads.allowed(ref.name) and not model.draining:
                            return model  # runs as loaded: the face says so (deferred)
                        if model.draining:  # for another's reload or swap: wait our turn
                            await self._wait_for_change(started, ref.name)
                            continue
                        reloading, drain_from = model, time.monotonic()
                        pin = self.reloads.begin(ref.name, pin, model.placement)
                        model.draining = True  # new requests wait for the copy placed anew
                    elif time.monotonic() - drain_from > self.settings.max_pass_over:
                        return model  # its requests run on: give up the reload (finally)
                    if model.idle and not model.in_flight:
                        self._start_unload(model)
                    await self._wait_for_change(started, ref.name, 0.05)
                    continue
                if model is not None and not model.draining:
                    return model
                if model is not None:  # draining for another model's swap: wait our turn
                    await self._wait_for_change(started, ref.name)
                    continue
                if ref.name in self._unloading:  # a reload waits for the old copy's memory
                    await self._wait_for_change(started, ref.name, 0.05)
                    continue
                model = await self._await_load(ref, started, self.reloads.load_pin(ref.name, pin))
                if self._resident.get(ref.name) is not model:
                    continue  # gone before this request could take it (its worker died)
                if answers(model.placement, pin) or reloading or not self.reloads.allowed(ref.name):
                    return model  # not answering: deferred (reloads.py), or not to be had
        finally:
            if reloading is not None:
                self.reloads.end(ref.name)
                if self._resident.get(ref.name) is reloading:
                    reloading.draining = False  # gave up before it went: serves on as it is
                    self._notify()

    async def _await_load(self, ref: ModelRef, started: float, pin: Pin) -> ResidentModel:
        task = self._loading.get(ref.name) or self._start_load(ref, started, pin)
        self._waiters[ref.name] = self._waiters.get(ref.name, 0) + 1
        try:
            # Shielded: a client that leaves must not cancel the load others wait on.
            return await asyncio.shield(task)
        finally:
            self._waiters[ref.name] -= 1

    async def _resolve(self, name: str, allow_path: bool) -> ModelRef:
        check_name(name, allow_path)
        # Resolving may read manifests and lay out an ONNX folder: keep it off the event loop.
        loop, find = asyncio.get_running_loop(), self.library.resolve
        return await loop.run_in_executor(None, with_draft, find, self.settings, name, allow_path)

    def deferred(self, model: ResidentModel, pin: Pin) -> str | None:
        """Where `model`, held for a request that pinned `pin`, runs as it is loaded, not as
        asked (reloads.py): what the face's `X-Localserve-Reload` header says; else None."""
        pin = as_it_takes_effect(pin, list(self.pools.values()))
        if answers(model.placement, pin):
            return None
        return deferred(model.placement, pin, self.settings.reload_interval)

    def _start_load(self, ref: ModelRef, started: float, pin: Pin) -> asyncio.Task[ResidentModel]:
        task = asyncio.get_running_loop().create_task(self._load_task(ref, started, pin))
        task.add_done_callback(lambda t: t.cancelled() or t.exception())
        self._loading[ref.name] = task
        return task

    async def _load_task(self, ref: ModelRef, started: float, pin: Pin) -> ResidentModel:
        try:
            model = await self._load(ref, started, pin)
        finally:
            del self._loading[ref.name]
            self._notify()
        if not self._waiters.get(ref.name):
            self._after_use(model)  # every requester left: its keep-alive starts now
        return model

    async def _load(self, ref: ModelRef, started: float, pin: Pin) -> ResidentModel:
        loop = asyncio.get_running_loop()
        pools = list(self.pools.values())
        estimate = await loop.run_in_executor(None, sized, self.loader, ref, pools, pin.ctx)
        pin = pin.or_layers(self.settings.gpu_layers)
        residents, waiters = self._resident.values(), self._waiters
        placement = place(estimate, pools, lambda p: eviction.room(p, residents, waiters), pin)
        check_budgets(ref.name, placement, self.pools)
        await self._make_room(ref.name, placement, started)
        for device, need in placement.need.items():
            self.pools[device].reserve(ref.name, need.total)
        try:
            model = await loop.run_in_executor(None, self.loader.load, ref, placement)
        except BaseException:
            self._release(ref.name)
            raise
        model.placement = placement
        self._resident[ref.name] = model
        self.load_counts[ref.name] = self.load_counts.get(ref.name, 0) + 1
        self.tally.load_seconds[ref.name] += model.load_seconds
        model.keep_alive_s = self.settings.keep_alive
        model.default_max_tokens = output_cap(self.settings, ref.name)
        self._notify()
        log.info(
            "loaded %s on %s (%d GPU layers) in %.2fs: estimate %s, the runtime reports %s",
            ref.name,
            placement.device,
            placement.gpu_layers,
            model.load_seconds,
            format_size(placement.total),
            format_size(model.actual_bytes),
        )
        return model

    def _evictable(self, model: ResidentModel) -> bool:
        return eviction.evictable(model, self._waiters)

    def _release(self, name: str) -> None:
        for pool in self.pools.values():
            pool.release(name)

    # -- making room -------------------------------------------------------------------------

    async def _make_room(self, name: str, placement: Placement, started: float) -> None:
        in_the_way: list[ResidentModel] = []
        waited_from = time.monotonic()
        waited = False
        # Loads that wait for room take it in the order they came: memory freed for an older
        # swap must not go to a newer request (one for the very model evicted, say).
        self._in_line.append(name)
        try:
            while self._in_line[0] != name or not self._room_for(name, placement):
                waited = True
                if self._in_line[0] != name:
                    await self._wait_for_change(started, name)
                    continue
                victim = eviction.idle_victim(
                    name,
                    eviction.short_pools(self.pools, placement),
                    self._over_cap(),
                    self._resident.values(),
                    self._waiters,
                )
                if victim is not None:
                    self.tally.evictions[victim.name] += 1
                    self._start_unload(victim)
                elif time.monotonic() - started > self.settings.max_pass_over:
                    # Stop feeding the models in the way, so they drain and can be evicted.
                    for model in self._resident.values():
                        if not model.pinned and not model.draining:
                            model.draining = True
                            in_the_way.append(model)
                # Wake at the pass-over bound too, so the models in the way drain on time.
                left = started + self.settings.max_pass_over - time.monotonic()
                await self._wait_for_change(started, name, left if left > 0 else 1.0)
        finally:
            self._in_line.remove(name)
            if waited:
                self.tally.swap(name, time.monotonic() - waited_from)
            for model in in_the_way:
                model.draining = False
            self._notify()

    def _room_for(self, name: str, placement: Placement) -> bool:
        return not eviction.short_pools(self.pools, placement) and not self._over_cap()

    def _over_cap(self) -> bool:
        cap = self.settings.max_loaded_models
        others = len(self._resident) + len(self._unloading) + len(self._loading) - 1
        return 0 < cap <= others

    async def _wait_for_change(self, started: float, name: str, at_most: float = 1.0) -> None:
        remaining = self.settings.load_timeout - (time.monotonic() - started)
        if remaining <= 0:
            residents, pools = self._resident.values(), self.pools.values()
            raise eviction.timed_out(name, self.settings.load_timeout, residents, pools)
        event = self._changed
        try:
            await asyncio.wait_for(event.wait(), min(remaining, 1.0, at_most))
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

        def done(_: object) -> None:
            self._release(name)
            self._unloading.discard(name)
            self._notify()

        loop.run_in_executor(None, self.loader.unload, model).add_done_callback(
            lambda f: loop.call_soon_threadsafe(done, f)
        )

    def _lost(self, names: list[str], why: str) -> None:
        """Models gone without an unload (their worker died): forget them, free their memory."""
        for name in names:
            model = self._resident.pop(name, None)
            self._cancel_timer(name)
            if model is not None:
                self._release(name)
                log.warning("%s is no longer loaded: %s", name, why)
        self._notify()

    async def preload(
        self,
        name: str,
        keep_alive_s: float | None = None,
        pin: Pin = AUTO,
        allow_path: bool = False,
    ) -> ResidentModel:
        """Load without a request, as `serve --model` and the admin API do; a file path only
        with `allow_path`, which the caller grants to the operator alone."""
        model = await self.ensure(name, allow_path=allow_path, pin=pin)
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
        self.loader.close()
        self._resident.clear()
