"""The probe's remedy on a CPU with AMX whose llama.cpp dies in the AMX kernels: the probe
leaves models loading without extra buffer types, which loses the repacked kernels too; this
builds llama.cpp without AMX once, in the background (native/remedy.py), probes that build
with the extra buffer types, and, when it decodes, names it in the verdict.

The CPU worker runs from that build at its next start (the supervisor reads the verdict before
each first load): the next daemon start, or a restart after a death. It does not switch at
once, since the running worker holds models and their requests. Meanwhile the fallback serves;
the log says when the build starts and how it ended, and /health shows where it stands.
`--no-native-build` keeps the fallback and builds nothing.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from localserve.engine.worker_client.probe import build_key_of, extra_bufts_verdict
from localserve.ground.errors import EngineStopped
from localserve.ground.settings import Settings
from localserve_native import hardware, remedy, verdicts
from localserve_native.wheels import BuildFailed, Builds, Runner

log = logging.getLogger(__name__)

BUILDING = "building llama.cpp without AMX (minutes, once)"
READY = "ready: the CPU engine runs the build without AMX from its next start"
STOPPED = "stopped with the daemon: the next start builds again"


class Remedy:
    """The background build for each device that needs one, and where it stands."""

    def __init__(
        self,
        settings: Settings,
        prepare: Callable[[Runner], Path] = lambda run: remedy.prepare(remedy.plan(), run),
        has_amx: Callable[[], bool] = lambda: hardware.read_cpu().has_amx,
    ) -> None:
        self.settings = settings
        self.state: dict[str, str] = {}  # by device: BUILDING, READY, STOPPED or "failed: why"
        self.builds = Builds()
        self._prepare = prepare
        self._has_amx = has_amx

    def stop(self) -> None:
        """The daemon is shutting down: a build under way ends now, compilers and all; the
        next start builds again, since only a whole build is ever kept (native/wheels.py)."""
        self.builds.stop()

    def start(self, device: str, key: str) -> threading.Thread | None:
        """Begin the remedy for the build `key`, whose probe saw the extra buffer types fail
        on `device`; None where there is none to run (another device, a CPU without AMX, the
        setting off, or it ran already)."""
        if device != "cpu" or self.settings.no_native_build or device in self.state:
            return None
        if not self._has_amx():
            return None  # the remedy is for the AMX kernels; another failure it cannot mend
        self.state[device] = BUILDING
        log.warning(
            "the %s engine runs without llama.cpp's extra buffer types (its AMX kernels die "
            "here): %s in the background; models keep loading meanwhile",
            device,
            BUILDING,
        )
        thread = threading.Thread(
            target=self._run, args=(device, key), name="native-build", daemon=True
        )
        thread.start()
        return thread

    def _run(self, device: str, key: str) -> None:
        try:
            folder = str(self._prepare(self.builds))
            survives = extra_bufts_verdict(
                device, build_key_of(device, self.settings, folder), self.settings, folder
            )
        except (BuildFailed, EngineStopped, OSError, TimeoutError) as exc:
            if self.builds.stopped:
                self.state[device] = STOPPED
                log.info("the %s engine's build without AMX stopped with the daemon", device)
            else:
                self._failed(device, str(exc))
            return
        if not survives:
            self._failed(device, "the build without AMX fails with extra buffer types too")
            return
        verdict = verdicts.read(key).get(device)
        if verdict is not None:
            verdicts.write(key, replace(verdict, build=folder))
        self.state[device] = READY
        log.warning("the %s engine's remedy is %s (%s)", device, READY, folder)

    def _failed(self, device: str, why: str) -> None:
        self.state[device] = f"failed: {why}"
        log.error("the %s engine's build without AMX failed: %s", device, why)
