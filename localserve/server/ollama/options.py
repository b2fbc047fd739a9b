"""Ollama's request `options`, and what a context window means to its users.

The options are declared in server/wire/ollama.py, with Ollama's defaults.

`num_ctx` asks for a context window. Ours is fixed per slot at load (no request allocates KV),
so a `num_ctx` up to a slot's context is honoured. A larger one reloads the model with it, as
Ollama does, once its running requests end (server/http/state.py's context_pin), where the
memory budget holds it and `--ctx` does not pin the context; otherwise it runs in the loaded
context, and the answer's `X-Localserve-Context` header says so with the figure (the one
/api/show, /api/ps and /v1/models report): agents send large ones, and a refusal failed their
first request. A prompt that does not fit is not refused, as Ollama's runner does not refuse
it: it keeps the first `num_keep` tokens and the most recent ones. Ollama then shifts the window
while it generates; we cannot, so the prompt is cut to half the window to leave the answer
room, and the answer ends with done_reason "length" when the window is full.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from localserve.ground.pin import Pin
from localserve.ground.sampling import SamplingParams
from localserve.server.wire.ollama import OPTIONS

log = logging.getLogger(__name__)

_NO_LIMIT = (1 << 31) - 1


@dataclass(frozen=True)
class OllamaOptions:
    params: SamplingParams
    num_ctx: int | None
    num_keep: int
    # num_gpu (layers on a GPU; -1 leaves it to placement) and main_gpu (which GPU, 0 first).
    pin: Pin = Pin()


def options_from(got: dict[str, Any]) -> OllamaOptions:
    """The request's options, as wire/ollama.py's declaration read them, with its `format`."""
    o = got["options"]
    last_n = o["repeat_last_n"] or 0
    params = OPTIONS.sampling(
        o,
        # repeat_last_n 0 turns penalties off in Ollama; -1 means the whole window.
        repeat_penalty=o["repeat_penalty"] if last_n != 0 else 1.0,
        penalty_last_n=last_n if last_n > 0 else _NO_LIMIT,
        grammar=got["format"],
    )
    num_keep = o["num_keep"]
    pin = Pin(
        device=None if o["main_gpu"] is None else f"gpu{o['main_gpu']}",
        gpu_layers=None if o["num_gpu"] is None or o["num_gpu"] < 0 else o["num_gpu"],
    )
    return OllamaOptions(
        params, o["num_ctx"], 4 if num_keep is None or num_keep < 0 else num_keep, pin
    )


CONTEXT_HEADER = "X-Localserve-Context"


def window(num_ctx: int | None, slot_ctx: int) -> tuple[int, str | None]:
    """The context a request gets: its num_ctx, up to a slot's context; above it, the slot's
    context and the notice that says so (never silently: the answer has less room than asked)."""
    if num_ctx is None or num_ctx <= slot_ctx:
        return num_ctx or slot_ctx, None
    return slot_ctx, (
        f"{slot_ctx}; num_ctx {num_ctx} is above the context this model loads with here (its "
        f"trained context, what the memory budget holds, or --ctx), so it runs in {slot_ctx}"
    )


def fit_prompt(tokens: list[int], ctx: int, num_keep: int) -> list[int]:
    """A prompt that fits the window with room to answer: the first num_keep tokens and the
    latest ones, as Ollama's runner truncates, cut to half the window (see the docstring)."""
    if len(tokens) < ctx:
        return tokens
    keep = min(num_keep, ctx // 4)
    tail = max(1, ctx // 2 - keep)
    log.warning(
        "truncating a prompt of %d tokens to %d for a %d-token window",
        len(tokens),
        keep + tail,
        ctx,
    )
    return tokens[:keep] + tokens[-tail:]
