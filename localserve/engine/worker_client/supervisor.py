"""The daemon's loader: every device's models run in an engine worker process of their own.

The daemon never runs a kernel. A worker that dies (SIGILL, an abort, a segfault, the OOM
killer) costs the requests in flight on its device and a restart, never the daemon or another
device's models: the requests end with EngineStopped's message, the models leave the manager
and give their memory back, and the next load starts a new worker after a bounded backoff. A
worker that dies twice at the same point (the same models, soon after it started) is not
restarted in a loop: the device is marked failed, with the reason, for /health and `status`.

Before a device's first load, the probe (engine/worker_client/probe.py) finds which llama.cpp
configuration survives a decode there, once per build and CPU. Where the extra buffer types
die on a CPU with AMX, the remedy (engine/worker_client/remedy.py) builds llama.cpp without
AMX in the background, and once a verdict names that build, the device's worker runs from it.
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import msgspec

from localserve.engine.worker_client.connection import WorkerProcess, worker_env
from localserve.engine.worker_client.placement import Placement
from localserve.engine.worker_client.probe import extra_bufts_verdict
from localserve.engine.worker_client.remedy import Remedy
from localserve.engine.worker_client.remote import RemoteRunner
from localserve.engine.worker_client.resident import ResidentModel
from localserve.engine.worker_client.sizing import layered_estimate
from localserve.formats.offload import LayeredEstimate
from localserve.ground import messages as m
from localserve.ground.errors import EngineStopped
from localserve.ground.model import ModelRef
from localserve.ground.settings import Settings
from localserve_native import verdicts

log = logging.getLogger(__name__)

# Test-only switches: more workers, as "cpu1" (two CPU workers stand in for two devices), and
# which worker a model runs in, as "model=device,..." (its memory stays in its pool).
TEST_DEVICES = "LOCALSERVE_TEST_DEVICES"
TEST_PLACE = "LOCALSERVE_TEST_PLACE"
# Restarts wait 0.5 s, then 1, 2, 4, at most 8 s after the last death.
BACKOFF_FIRST_S = 0.5
BACKOFF_MAX_S = 8.0
# A worker that dies this soon after its start, with the same models as the last one that
# died, died "at the same point".
SAME_POINT_S = 60.0

# Called on the event loop when a device's models are gone at once (its worker died): their
# names and why, so the manager drops them and gives their memory back.
LostModels = Callable[[list[str], str], None]


@dataclass
class Device:
    """One device's worker and its history of deaths."""

    name: str
    worker: WorkerProcess | None = None
    started_at: float = 0.0
    deaths: int = 0
    died_at: float = 0.0
    last_point: tuple[str, ...] | None = None
    last_cause: str | None = None
    failed: str | None = None
    use_extra_bufts: bool | None = None
    build: str = ""  # the remedy's llama.cpp its worker runs from, or "" for the venv's
    models: dict[str, RemoteRunner] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)
    sent: Counter[str] = field(default_factory=Counter)  # messages to its workers, by kind


class WorkerLoader:
    """Loads, unloads and steps models in one engine worker per device: the CPU, each GPU."""

    def __init__(self, settings: Settings, devices: tuple[str, ...] = ("cpu",)) -> None:
        self.settings = settings
        extra = tuple(d for d in os.environ.get(TEST_DEVICES, "").split(",") if d)
        self.devices = {name: Device(name) for name in (*devices, *extra)}
        # model -> device, from the test-only LOCALSERVE_TEST_PLACE="model=device,...".
        self._placed = dict(
            pair.split("=", 1) for pair in os.environ.get(TEST_PLACE, "").split(",") if "=" in pair
        )
        self._loop = asyncio.get_running_loop()
        self._lost: LostModels = lambda names, why: None
        self._closing = False
        self.remedy = Remedy(settings)

    # -- the Loader seam ---------------------------------------------------------------------

    def on_lost(self, callback: LostModels) -> None:
        self._lost = callback

    def estimate(self, ref: ModelRef, room: int | None = None, ctx: int = 0) -> LayeredEstimate:
        return layered_estimate(
            ref, replace(self.settings, ctx=ctx) if ctx else self.settings, room
        )

    def load(self, ref: ModelRef, placement: Placement) -> ResidentModel:
        device = self.devices[self._placed.get(ref.name, placement.device)]
        worker = self._worker(device)
        extra_bufts = self._extra_bufts(device, worker) if ref.format == "gguf" else True
        worker = device.worker or worker  # the probe's verdict may have moved it to a build
        prompt_cache = sum(need.prompt_cache for need in placement.need.values())
        load = m.Load(
            0,
            ref,
            prompt_cache,
            extra_bufts,
            placement.gpu_layers,
            placement.backend_device,
            placement.n_ctx_slot,
        )
        loaded = msgspec.convert(worker.ask(load), m.Loaded)
        runner = RemoteRunner(worker, loaded.info, loaded.n_vocab)
        device.models[ref.name] = runner
        model = ResidentModel(loaded.info, runner, device=device.name)
        model.load_seconds = loaded.load_seconds
        model.placement = placement
        model.actual_bytes = loaded.actual_bytes
        model.buffers = loaded.buffers
        model.rss_delta = loaded.rss_delta
        model.draft_model = ref.draft.name if ref.draft else None
        return model

    def unload(self, model: ResidentModel) -> None:
        device = self.devices[model.device]
        runner = device.models.pop(model.name, None)
        worker = device.worker
        if runner is None or worker is None or runner.worker is not worker:
            return  # its worker died: the model went with it
        try:
            worker.ask(m.Unload(0, model.name))
        except EngineStopped:
            pass

    def close(self) -> None:
        self._closing = True
        self.remedy.stop()
        for device in self.devices.values():
            if device.worker is not None:
                device.worker.stop()

    # -- devices -----------------------------------------------------------------------------

    def health(self) -> dict[str, Any]:
        """Each device's state for /health: running, idle (no worker yet), or failed and why."""
        out: dict[str, Any] = {}
        for device in self.devices.values():
            worker = device.worker
            state = (
                "failed" if device.failed else ("running" if worker and worker.alive else "idle")
            )
            out[device.name] = {
                "state": state,
                "reason": device.failed,
                "restarts": device.deaths,
                "last_cause": device.last_cause,
                "pid": worker.pid if worker and worker.alive else None,
                "sent": dict(device.sent),
                "native_build": self.remedy.state.get(device.name),
            }
        return out

    def _worker(self, device: Device) -> WorkerProcess:
        with device.lock:
            if device.failed:
                raise EngineStopped(device.name, device.failed)
            if device.worker is not None and device.worker.alive:
                return device.worker
            if device.deaths:
                wait = min(BACKOFF_FIRST_S * 2 ** (device.deaths - 1), BACKOFF_MAX_S)
                time.sleep(max(0.0, device.died_at + wait - time.monotonic()))
            device.worker = self._spawn(device)
            device.started_at = time.monotonic()
            return device.worker

    def _spawn(self, device: Device) -> WorkerProcess:
        log.info("starting the %s engine worker", device.name)
        return WorkerProcess(
            device.name,
            self.settings,
            self._from_worker(device.name),
            self._exited,
            env=worker_env(device.build),
            sent=device.sent,
        )

    def _extra_bufts(self, device: Device, worker: WorkerProcess) -> bool:
        with device.lock:
            if device.use_extra_bufts is None:
                device.use_extra_bufts = self._probe(device, worker)
        return device.use_extra_bufts

    def _probe(self, device: Device, worker: WorkerProcess) -> bool:
        """The verdict for the build `worker` runs; where it says the extra buffer types die,
        the worker moves to the remedy's build if one is named and kept, or the remedy starts."""
        key = str(worker.ask(m.Stats(0), timeout=self.settings.probe_timeout)["build_key"])
        if extra_bufts_verdict(device.name, key, self.settings):
            return True
        verdict = verdicts.read(key).get(device.name)
        build = verdict.build if verdict is not None else ""
        if not build or not os.path.isdir(os.path.join(build, "llama_cpp")):
            self.remedy.start(device.name, key)
            return False
        log.info("the %s engine runs the build without AMX in %s", device.name, build)
        device.build = build
        device.worker = self._spawn(device)
        device.started_at = time.monotonic()
        worker.stop()  # fresh: the first load asked for the probe, so it holds no model
        moved = device.worker.ask(m.Stats(0), timeout=self.settings.probe_timeout)["build_key"]
        return extra_bufts_verdict(device.name, str(moved), self.settings, build)

    def _from_worker(self, name: str) -> Callable[[m.Step | m.Embedded], None]:
        def deliver(message: m.Step | m.Embedded) -> None:
            self._call(self._dispatch, name, message)

        return deliver

    def _call(self, callback: Callable[..., None], *args: object) -> None:
        try:
            self._loop.call_soon_threadsafe(callback, *args)
        except RuntimeError:  # the loop closed: the daemon is shutting down
            pass

    def _dispatch(self, name: str, message: m.Step | m.Embedded) -> None:
        runner = self.devices[name].models.get(message.model)
        if runner is None:
            return  # unloaded since
        if isinstance(message, m.Step):
            runner.stepped(message.outputs, message.load)
        else:
            runner.embedded(message)

    def _exited(self, worker: WorkerProcess, cause: str) -> None:
        """On the reader thread: a worker's socket closed."""
        self._call(self._lose, worker, cause)

    def _lose(self, worker: WorkerProcess, cause: str) -> None:
        device = self.devices[worker.device]
        if device.worker is not worker or self._closing:
            return  # an old worker, already replaced; or one we stopped
        error = EngineStopped(device.name, cause)
        lost = sorted(device.models)
        for runner in device.models.values():
            runner.lost(error)
        device.models.clear()
        self._count_death(device, tuple(lost), cause)
        log.error("%s; models lost: %s", error, ", ".join(lost) or "none")
        self._lost(lost, str(error))

    def _count_death(self, device: Device, point: tuple[str, ...], cause: str) -> None:
        now = time.monotonic()
        soon = now - device.started_at < SAME_POINT_S
        if soon and device.deaths and point == device.last_point:
            device.failed = (
                f"{cause}, twice at the same point (models: {', '.join(point) or 'none'}); not "
                "restarting it again: see `localserve doctor`"
            )
            log.error("the %s engine is marked failed: %s", device.name, device.failed)
        device.deaths += 1
        device.died_at = now
        device.last_cause = cause
        device.last_point = point
