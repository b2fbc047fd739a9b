"""The probe: which llama.cpp configuration survives a decode on a device, tested by running.

llama.cpp 0.3.36 built with GGML_NATIVE dies of SIGILL in its AMX kernels on the first decode
on some Xeons; loading without the extra buffer types (AMX, repacked weights) avoids it. Before
a device's first load, a throwaway worker loads the embedded SmolLM2 and decodes with them, then
another without. Each trial records which buffer types held the weights (so which kernels ran)
and what a token cost (`localserve doctor` shows both). The extra buffer types are kept where
they survive: they only add kernels, and the probe's model, Q4_1, is not one llama.cpp repacks,
so its timing cannot speak for a user's Q4_0 or Q4_K model. The log says why, and the verdict
is kept per (llama.cpp build, CPU) in the state folder (native/verdicts.py), so a machine pays
for the probe once per build: about the time of two worker starts and loads of the 100 MB
model, two to three seconds here.

A configuration survives only if its worker answered with a token. A worker that dies, reports
an error, or sends nothing within `probe_timeout` seconds has failed: a hang is a failure, never a
verdict of success. Where there is nothing to probe with (no embedded model), no verdict is
kept: the default is used this time and the next start probes again.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import replace

import msgspec

from localserve.engine.worker_client.connection import WorkerProcess, worker_env
from localserve.ground import messages as m
from localserve.ground.errors import EngineStopped
from localserve.ground.model import ModelRef
from localserve.ground.sampling import SamplingParams
from localserve.ground.settings import Settings
from localserve.store.resolve import embedded_path
from localserve_native import verdicts

log = logging.getLogger(__name__)
# Tokens timed after the first: enough to average a step's jitter, about 0.2 s here.
TIMED_TOKENS = 32


def extra_bufts_verdict(device: str, key: str, settings: Settings, build: str = "") -> bool:
    """Whether `device` loads models with llama.cpp's extra buffer types; probes if need be.

    `key` names the build that will run them (native/verdicts.py's `build_key`): the daemon asks
    the device's worker, since a worker may run another build than the daemon's venv (`build`,
    the remedy's: engine/worker_client/remedy.py); code that runs llama.cpp in its own process
    (the in-process tests, benchmarks) computes it there."""
    known = verdicts.read(key).get(device)
    if known is not None:
        return known.use_extra_bufts
    if embedded_path("smollm2") is None:
        log.info("probe for %s: no embedded model to probe with; extra buffer types on", device)
        return True
    t0 = time.perf_counter()
    trials = (
        try_decode(device, settings, extra_bufts=True, build=build),
        try_decode(device, settings, extra_bufts=False, build=build),
    )
    (with_them, without), took = trials, time.perf_counter() - t0
    if with_them.failure is None:
        reason = "decoded with llama.cpp's extra buffer types"
        verdict = verdicts.Verdict.now(device, True, reason, took, trials)
    else:
        failed = with_them.failure
        if without.failure is not None:
            raise EngineStopped(
                device,
                f"the probe's worker failed with llama.cpp's extra buffer types ({failed}) "
                f"and without them ({without.failure}); see `localserve doctor`",
            )
        reason = (
            f"with llama.cpp's extra buffer types the worker failed: {failed}; "
            "without them it decoded"
        )
        verdict = verdicts.Verdict.now(device, False, reason, took, trials)
        log.warning(
            "the %s engine failed with llama.cpp's extra buffer types (%s): loading models "
            "without them (`localserve doctor` names a build that needs no fallback)",
            device,
            failed,
        )
    log.info("probe for %s: %s (%.2f s)", device, verdict.reason, verdict.seconds)
    verdicts.write(key, verdict)
    return verdict.use_extra_bufts


def try_decode(
    device: str, settings: Settings, extra_bufts: bool, build: str = ""
) -> verdicts.Trial:
    """Load the embedded SmolLM2 in a throwaway worker and decode greedily: the trial's failure
    is None if a token came, else what went wrong (how the worker died, the error it reported,
    or that it hung); a worker that decoded is timed over TIMED_TOKENS more."""
    path = embedded_path("smollm2")
    if path is None:
        raise FileNotFoundError("the embedded model is missing: nothing to probe with")
    ended = threading.Event()
    arrivals: list[tuple[float, int]] = []  # (when, tokens so far), one per step with tokens
    errors: list[str] = []
    finished: list[bool] = []

    def on_message(message: m.Step | m.Embedded) -> None:
        if not isinstance(message, m.Step):
            return
        for output in message.outputs:
            if output.error:
                errors.append(output.error)
            elif output.tokens:
                count = arrivals[-1][1] if arrivals else 0
                arrivals.append((time.perf_counter(), count + len(output.tokens)))
            if output.finish_reason and not output.error:
                finished.append(True)
            if output.error or output.finish_reason:
                ended.set()

    small = replace(settings, parallel=1, ctx=256, prompt_cache=0, step_tokens=64)
    worker = WorkerProcess(
        device, small, on_message, lambda w, cause: ended.set(), worker_env(build)
    )
    started = time.monotonic()
    weights: tuple[str, ...] = ()
    try:
        timeout = settings.probe_timeout
        load = m.Load(0, ModelRef(m.PROBE_MODEL, path), 0, extra_bufts)
        loaded = msgspec.convert(worker.ask(load, timeout), m.Loaded)
        weights = weight_buffers(loaded.buffers)
        params = SamplingParams(temperature=0.0, max_tokens=1 + TIMED_TOKENS, ignore_eos=True)
        worker.ask(m.Submit(0, m.PROBE_MODEL, 1, params, "prompt", [1, 2, 3]), timeout)
        ended.wait(max(0.0, timeout - (time.monotonic() - started)))
    except (EngineStopped, TimeoutError):
        pass  # judged below, from what the worker did
    finally:
        cause = worker.cause
        worker.stop()
    seconds = time.monotonic() - started
    failure = verdict_of(cause, bool(finished), errors, seconds, len(arrivals))
    if failure is not None:
        return verdicts.Trial(extra_bufts, failure)
    return verdicts.Trial(extra_bufts, None, weights, ms_per_token(arrivals))


def weight_buffers(buffers: dict[str, int]) -> tuple[str, ...]:
    """The buffer types that hold a model's weights, from the load's buffers by name
    ("cpu_repack model", "cpu_mapped model", "cpu kv"): the kernels follow them."""
    return tuple(sorted(name[: -len(" model")] for name in buffers if name.endswith(" model")))


def ms_per_token(arrivals: list[tuple[float, int]]) -> float | None:
    """Milliseconds per token after the first step's: its prompt and warm-up are not decode."""
    if len(arrivals) < 2:
        return None
    (t0, n0), (t1, n1) = arrivals[0], arrivals[-1]
    return round((t1 - t0) * 1000 / (n1 - n0), 3) if n1 > n0 else None


def build_key_of(device: str, settings: Settings, build: str = "") -> str:
    """The build key (native/verdicts.py) of the llama.cpp a worker of `build` runs, asked of
    a throwaway worker: the daemon itself never loads llama.cpp."""
    small = replace(settings, parallel=1, ctx=256, prompt_cache=0)
    worker = WorkerProcess(
        device, small, lambda message: None, lambda w, c: None, worker_env(build)
    )
    try:
        return str(worker.ask(m.Stats(0), timeout=settings.probe_timeout)["build_key"])
    finally:
        worker.stop()


def verdict_of(
    cause: str | None, decoded: bool, errors: list[str], seconds: float, steps: int = 0
) -> str | None:
    """None only for a worker that decoded to the end; else why the configuration failed."""
    if cause is not None:
        return cause
    if errors:
        return f"the decode failed: {errors[0]}"
    if not decoded and steps:
        return f"the decode stopped after {steps} steps and {seconds:.0f} s: it hung"
    if not decoded:
        return f"no token within {seconds:.0f} s: the decode hung"
    return None
