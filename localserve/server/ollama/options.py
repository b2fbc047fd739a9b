"""Ollama's request `options`, and what a context window means to its users.

Ollama's defaults differ from OpenAI's (top_p 0.9, min_p 0, repeat_penalty 1.1 over the last
64 tokens), and an Ollama user expects them: they are what `ollama run` gives.

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
from dataclasses import dataclass, replace

from localserve.engine.residency.placement import Pin
from localserve.ground.sampling import SamplingParams
from localserve.server.chat import structured
from localserve.server.http import validation as v

log = logging.getLogger(__name__)

_NO_LIMIT = (1 << 31) - 1


@dataclass(frozen=True)
class OllamaOptions:
    params: SamplingParams
    num_ctx: int | None
    num_keep: int
    # num_gpu (layers on a GPU; -1 leaves it to placement) and main_gpu (which GPU, 0 first).
    pin: Pin = Pin()


def options_from(body: v.JSON) -> OllamaOptions:
    o = v.obj(body, "options")
    num_predict = v.integer(o, "num_predict", -1, -2, _NO_LIMIT)
    seed = v.integer(o, "seed", -1, -(1 << 63), (1 << 64) - 1)
    repeat_last_n = v.integer(o, "repeat_last_n", 64, -1, _NO_LIMIT) or 0
    repeat_penalty = v.number(o, "repeat_penalty", 1.1, 0.0, 10.0)
    params = SamplingParams(
        temperature=v.number(o, "temperature", 0.8, 0.0, 10.0),
        top_k=v.integer(o, "top_k", 40, 0, _NO_LIMIT) or 0,
        top_p=v.number(o, "top_p", 0.9, 0.0, 1.0),
        min_p=v.number(o, "min_p", 0.0, 0.0, 1.0),
        # repeat_last_n 0 turns penalties off in Ollama; -1 means the whole window (set later).
        repeat_penalty=repeat_penalty if repeat_last_n != 0 else 1.0,
        presence_penalty=v.number(o, "presence_penalty", 0.0, -2.0, 2.0),
        frequency_penalty=v.number(o, "frequency_penalty", 0.0, -2.0, 2.0),
        penalty_last_n=repeat_last_n if repeat_last_n > 0 else _NO_LIMIT,
        seed=None if seed == -1 else seed,
        # -1: until the window is full; -2: fill the window. Both mean no cap of our own.
        max_tokens=None if num_predict is None or num_predict < 0 else max(num_predict, 1),
        stop=v.stop_list(o),
        grammar=structured.from_format(body),
        draft_tokens=v.draft_tokens(o),
    )
    num_ctx = v.integer(o, "num_ctx", None, 1, _NO_LIMIT)
    num_keep = v.integer(o, "num_keep", 4, -1, _NO_LIMIT)
    return OllamaOptions(
        params, num_ctx, 4 if num_keep is None or num_keep < 0 else num_keep, placement_pin(o)
    )


def placement_pin(o: v.JSON) -> Pin:
    """Ollama's num_gpu and main_gpu: the model is placed (or reloaded) to honour them."""
    num_gpu = v.integer(o, "num_gpu", -1, -1, _NO_LIMIT)
    main_gpu = v.integer(o, "main_gpu", None, 0, 255)
    return Pin(
        device=None if main_gpu is None else f"gpu{main_gpu}",
        gpu_layers=None if num_gpu is None or num_gpu < 0 else num_gpu,
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


def answer_room(
    params: SamplingParams, prompt_len: int, ctx: int, default: int | None = None
) -> SamplingParams:
    """Cap the answer so prompt and answer stay within the window; `default` is the cap of a
    request without num_predict (the settings' max_tokens)."""
    room = max(1, ctx - prompt_len)
    asked = params.max_tokens if params.max_tokens is not None else default
    cap = room if asked is None else min(asked, room)
    last_n = min(params.penalty_last_n, ctx)
    return replace(params, max_tokens=cap, penalty_last_n=last_n)
