"""The probe: which llama.cpp configuration survives a decode on a device, tested by running.

llama.cpp 0.3.36 built with GGML_NATIVE dies of SIGILL in its AMX kernels on the first decode
on some Xeons; loading without the extra buffer types (AMX, repacked weights) avoids it. Before
a device's first load, a throwaway worker loads the embedded SmolLM2 and decodes one token with
them; if that worker dies, another tries without. The first configuration that survives is
used, the log says why, and the verdict is kept per (llama.cpp build, CPU) in the state folder
(native/verdicts.py), so a machine pays for the probe once per build: about the time of two
worker starts and a load of the 100 MB model, one to two seconds here.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import replace

from localserve.engine.workers.connection import WorkerProcess, worker_env
from localserve.ground import messages as m
from localserve.ground.errors import EngineStopped
from localserve.ground.model import ModelRef
from localserve.ground.sampling import SamplingParams
from localserve.ground.settings import Settings
from localserve.store.resolve import embedded_path
from localserve_native import verdicts

log = logging.getLogger(__name__)

# Generous: a cold page cache and a busy machine make the probe's load slow, never wrong.
PROBE_TIMEOUT_S = 120.0


def extra_bufts_verdict(device: str, worker: WorkerProcess, settings: Settings) -> bool:
    """Whether `device` loads models with llama.cpp's extra buffer types; probes if need be.

    `worker` is the device's running worker: it names the build it runs (its build key)."""
    key = str(worker.ask(m.Stats(0), timeout=PROBE_TIMEOUT_S)["build_key"])
    known = verdicts.read(key).get(device)
    if known is not None:
        return known.use_extra_bufts
    t0 = time.perf_counter()
    died = try_decode(device, settings, extra_bufts=True)
    if died is None:
        verdict = verdicts.Verdict.now(
            device,
            True,
            "decoded a token with llama.cpp's extra buffer types",
            time.perf_counter() - t0,
        )
    else:
        died_too = try_decode(device, settings, extra_bufts=False)
        if died_too is not None:
            raise EngineStopped(
                device,
                f"the probe's worker died with llama.cpp's extra buffer types ({died}) "
                f"and without them ({died_too}); see `localserve doctor`",
            )
        verdict = verdicts.Verdict.now(
            device,
            False,
            f"with llama.cpp's extra buffer types the worker died of {died}; "
            "without them it decoded",
            time.perf_counter() - t0,
        )
        log.warning(
            "the %s engine died with llama.cpp's extra buffer types (%s): loading models without "
            "them (`localserve doctor` names a build that needs no fallback)",
            device,
            died,
        )
    log.info("probe for %s: %s (%.2f s)", device, verdict.reason, verdict.seconds)
    verdicts.write(key, verdict)
    return verdict.use_extra_bufts


def try_decode(device: str, settings: Settings, extra_bufts: bool) -> str | None:
    """Load the embedded SmolLM2 in a throwaway worker and decode one token: None if it did,
    else how the worker died."""
    path = embedded_path("smollm2")
    if path is None:
        return None  # nothing to probe with: trust the default
    done = threading.Event()

    def on_message(message: m.Step | m.Embedded) -> None:
        if isinstance(message, m.Step) and any(o.finish_reason for o in message.outputs):
            done.set()

    small = replace(settings, parallel=1, ctx=256, prompt_cache=0, step_tokens=64)
    worker = WorkerProcess(device, small, on_message, lambda w, cause: done.set(), worker_env())
    cause: str | None = None
    try:
        worker.ask(m.Load(0, ModelRef("probe", path), 0, extra_bufts), PROBE_TIMEOUT_S)
        params = SamplingParams(temperature=0.0, max_tokens=1)
        worker.ask(m.Submit(0, "probe", 1, params, "prompt", [1, 2, 3]), PROBE_TIMEOUT_S)
        done.wait(PROBE_TIMEOUT_S)
    except EngineStopped:
        pass
    finally:
        cause = worker.cause
        worker.stop()
    return cause
