"""Faults a test injects into a worker, behind one switch that is off unless a test sets it.

`LOCALSERVE_TEST_FAULT` names one fault:
- `abort-at-step:N`: the worker kills itself with SIGABRT inside its Nth step;
- `sigill-with-extra-bufts`: it dies of SIGILL on the first step of a model loaded with
  llama.cpp's extra buffer types, as llama.cpp's AMX kernels do on some Xeons;
- `hang-with-extra-bufts`: that step never ends, as a wedged kernel's would;
- `slow-steps:MS`: every step takes MS milliseconds more, as a long prompt's prefill would.

The two numbered ones stand for a served model's step and spare the load probe's steps, whose
verdict and timing they would spoil. Anything else in the switch stops the worker at its
start, so that a misspelt fault cannot pass for a test that ran without one.
"""

from __future__ import annotations

import faulthandler
import os
import signal
import time
from collections.abc import Mapping
from dataclasses import dataclass

SWITCH = "LOCALSERVE_TEST_FAULT"
KINDS = ("abort-at-step", "sigill-with-extra-bufts", "hang-with-extra-bufts", "slow-steps")
_NUMBERED = ("abort-at-step", "slow-steps")
# Faults that stand for what a served model's step may do; the load probe's steps are spared.
SERVING_FAULTS = _NUMBERED


@dataclass(frozen=True)
class Fault:
    kind: str = ""  # "" (none), or one of KINDS
    at_step: int = 0  # abort-at-step's N; slow-steps' milliseconds

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> Fault:
        text = env.get(SWITCH, "")
        if not text:
            return cls()
        kind, _, number = text.partition(":")
        if kind not in KINDS or (kind in _NUMBERED) != number.isdigit():
            raise SystemExit(f"{SWITCH}={text!r}: not a fault (one of {', '.join(KINDS)})")
        return cls(kind, int(number or 0))

    def at(self, step: int, extra_bufts_loaded: bool) -> None:
        """Inject the fault, if it is due at this step."""
        if self.kind == "abort-at-step" and step >= self.at_step:
            _die(signal.SIGABRT)
        elif self.kind == "sigill-with-extra-bufts" and extra_bufts_loaded:
            _die(signal.SIGILL)
        elif self.kind == "hang-with-extra-bufts" and extra_bufts_loaded:
            while True:
                time.sleep(3600)
        elif self.kind == "slow-steps":
            time.sleep(self.at_step / 1000)


def _die(sig: signal.Signals) -> None:
    """The signal itself, with no traceback dump in the way (the dump is best effort, and once
    turned a SIGILL into a SIGSEGV)."""
    faulthandler.disable()  # puts back the default action, which Python leaves for these
    os.kill(os.getpid(), sig)
