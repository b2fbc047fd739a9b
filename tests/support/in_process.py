"""llama.cpp in the test's own process, configured as the daemon's probe says.

A few tests and benchmarks build `LlamaCppBackend` directly, without a daemon, to read logits
and step costs. On Xeons that advertise AMX, llama.cpp 0.3.36 built natively dies of SIGILL in its
AMX kernels on the first decode; the daemon's probe finds that and loads without extra buffer
types. `options()` takes the same verdict for this build on this CPU (native/verdicts.py),
running the probe first where there is none yet, so such code loads as the daemon would and
never hard-codes the buffer types. Tests that decode in-process are also marked `kernels`, so
that a native crash fails only them (tests/support/isolated.py).
"""

from __future__ import annotations

import functools
from dataclasses import replace
from typing import Any

from localserve.backends.llama_cpp import LlamaCppOptions
from localserve.engine.worker_client.probe import extra_bufts_verdict
from localserve.ground.settings import Settings
from localserve_native import verdicts


@functools.cache
def extra_bufts() -> bool:
    """Whether the CPU device loads with llama.cpp's extra buffer types: the daemon's verdict."""
    return extra_bufts_verdict("cpu", verdicts.build_key(), Settings())


def options(n_slots: int, n_ctx_slot: int, n_batch: int = 512, **more: Any) -> LlamaCppOptions:
    """A backend's options on 2 threads, with the buffer types the probe's verdict allows."""
    base = LlamaCppOptions(n_slots, n_ctx_slot, 2, n_batch, use_extra_bufts=extra_bufts())
    return replace(base, **more)


def force_sigill_verdict() -> None:
    """Record for this build on this CPU what an AMX host's probe records, so that the daemons
    and the in-process backends started after it load as they would there."""
    reason = (
        "with llama.cpp's extra buffer types the worker failed: it died of SIGILL (forced by "
        "the tests, as on a host whose AMX kernels die); without them it decoded"
    )
    verdicts.write(verdicts.build_key(), verdicts.Verdict.now("cpu", False, reason, 0.0))
    extra_bufts.cache_clear()
