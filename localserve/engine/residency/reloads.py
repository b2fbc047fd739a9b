"""Reloads a request's options ask for (Ollama's `num_ctx`, `num_gpu`, `main_gpu`), kept from
storms: any client may send any options, and each reload drains the model, so every other
client's requests wait behind it.

- **At most one a `reload_interval`** per model. Past that, a request whose options the loaded
  model does not answer runs as it is loaded, and its answer says so (the face's
  `X-Localserve-Reload` header, from `deferred`). A client alternating `num_gpu`, or climbing
  `num_ctx` a step at a time, reloads the model once an interval, not on every request.
- **A bounded drain.** A reload waits for the model's running requests to end for at most
  `max_pass_over`, as a swap does; past it, the reload is given up and the request runs as the
  model is loaded. Requests that wait behind a reload then never run out their `load_timeout`
  on someone else's long answer.
- **The reload's options, for whoever loads first.** Requests that asked nothing wait behind a
  draining model; the first to find it gone may start the load, and it loads with the options
  the reload was for (else the reloader would find its options unanswered and reload again).
- **A grown context is kept**: a reload for other options loads with the context an earlier
  reload grew, so a later `num_gpu` does not shrink what `num_ctx` asked for.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace

from localserve.engine.worker_client.placement import Placement
from localserve.ground.pin import Pin

RELOAD_HEADER = "X-Localserve-Reload"


@dataclass
class Reloads:
    interval: float  # seconds between reloads of one model for options
    began: dict[str, float] = field(default_factory=dict)  # model: when its last reload began
    pending: dict[str, Pin] = field(default_factory=dict)  # model: the pin its reload loads

    def allowed(self, name: str) -> bool:
        last = self.began.get(name)
        return last is None or time.monotonic() - last >= self.interval

    def begin(self, name: str, pin: Pin, loaded: Placement) -> Pin:
        """The pin the reload of `name` loads with (`pin`, keeping a context an earlier reload
        grew), recorded for whoever starts the load."""
        if pin.ctx is None and loaded.pin.ctx is not None:
            pin = replace(pin, ctx=loaded.pin.ctx)
        self.began[name] = time.monotonic()
        self.pending[name] = pin
        return pin

    def end(self, name: str) -> None:
        self.pending.pop(name, None)

    def load_pin(self, name: str, pin: Pin) -> Pin:
        """The pin a load of `name` asked with `pin` uses: a pending reload's, where `pin`
        asks nothing of its own."""
        return self.pending.get(name, pin) if pin.free else pin


def deferred(placement: Placement, pin: Pin, interval: float) -> str:
    """What the `X-Localserve-Reload` header says of a request run as the model is loaded."""
    where = f"{placement.device}, {placement.gpu_layers} GPU layers"
    return (
        f"not reloaded for this request's options: it runs as the model is loaded ({where}, "
        f"{placement.n_ctx_slot} tokens a slot); a model reloads for options at most once "
        f"every {interval:g} s (reload_interval), and waits at most max_pass_over for its "
        "running requests to end"
    )
