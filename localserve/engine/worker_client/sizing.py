"""How a model of each format is sized before it loads: what the supervisor answers the
manager's `estimate` with (engine/residency/loader.py's Loader), and what placement then splits
between the CPU and a device.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from localserve.formats import MemoryEstimate
from localserve.formats.errors import refused_as_load_failure
from localserve.formats.gguf import check_gguf, layered
from localserve.formats.gguf_header import GGUFHeader
from localserve.formats.offload import LayeredEstimate, unsplit
from localserve.formats.onnx import estimate_onnx, provider_for_estimate, read_folder
from localserve.ground import kv_cache
from localserve.ground.errors import LoadFailed
from localserve.ground.model import ModelRef
from localserve.ground.settings import Settings
from localserve.ground.units import F16

# An automatic context is never below this (or below the trained context, when that is less):
# Ollama's default num_ctx, and what the project served by default before contexts were fitted.
MIN_AUTO_CTX = 4096
CTX_STEP = 256  # llama.cpp pads a context to 256 cells


def layered_estimate(ref: ModelRef, s: Settings, room: int | None = None) -> LayeredEstimate:
    """What the model will take once loaded with these settings, by layer; refuses a broken
    file. Placement splits it between the CPU and a device. With an automatic context (`ctx`
    0), a GGUF model's is fitted to `room` bytes (None: its trained context, whole)."""
    with refused_as_load_failure(ref.name):
        return _estimate(ref)(ref, s, room)


def estimate_load(ref: ModelRef, s: Settings) -> MemoryEstimate:
    """What the model takes loaded all on the CPU: the figure a CPU-only daemon reserves, which
    a test or benchmark that sizes a budget uses too."""
    return layered_estimate(ref, s).whole


def _estimate_gguf(ref: ModelRef, s: Settings, room: int | None) -> LayeredEstimate:
    header = check_gguf(ref.path)
    kv = kv_cache.element_bytes(s, ref.name)
    ctx = s.ctx or fitted_ctx(header, s, room, kv)
    estimate = _layered_gguf(header, s, ctx, s.prompt_cache, kv)
    if ref.draft is None:
        return estimate
    # The draft has slots like its model's, its cache of the same type, and no prompt cache.
    return replace(estimate, draft=_layered_gguf(check_gguf(ref.draft.path), s, ctx, 0, kv))


def _layered_gguf(
    header: GGUFHeader, s: Settings, ctx: int, prompt_cache: int, kv: float
) -> LayeredEstimate:
    return layered(
        header,
        n_slots=s.parallel,
        n_ctx_slot=ctx,
        n_ubatch=s.step_tokens,
        prompt_cache_limit=prompt_cache,
        kv_element_bytes=kv,
        swa_full=False,  # as the backend sets it
    )


def fitted_ctx(header: GGUFHeader, s: Settings, room: int | None, kv: float = F16) -> int:
    """An automatic context per slot, as llama.cpp's `--fit` and Lemonade's `ctx_size=-1`
    choose one: the model's trained context, or as much of it as `room` bytes hold with every
    slot (multiples of CTX_STEP), and never less than MIN_AUTO_CTX (or the trained context, if
    that is less), whatever the room: a model that cannot take that much does not fit at all."""
    trained = int(header.arch_value("context_length", 0) or 0) or MIN_AUTO_CTX
    least = min(MIN_AUTO_CTX, trained)

    def fits(ctx: int) -> bool:
        return room is None or _layered_gguf(header, s, ctx, s.prompt_cache, kv).whole.total <= room

    if fits(trained):
        return trained
    # A binary search over the step counts k of the multiples k * CTX_STEP strictly between the
    # floor and the trained context, not over contexts: halving contexts and rounding down to a
    # step stalls once the two bounds are less than two steps apart around a trained context
    # that is no multiple of it (200,000: the midpoint rounds back onto the lower bound).
    best = least  # fits, or is the floor
    first, last = least // CTX_STEP + 1, (trained - 1) // CTX_STEP
    while first <= last:  # each turn leaves at most half of first..last
        k = (first + last) // 2
        if fits(k * CTX_STEP):
            best, first = k * CTX_STEP, k + 1
        else:
            last = k - 1
    return best


def _estimate_onnx(ref: ModelRef, s: Settings, room: int | None) -> LayeredEstimate:
    folder = read_folder(ref.path)
    max_length = min(s.ctx or folder.context_length, folder.context_length)
    provider = provider_for_estimate(folder)
    estimate = estimate_onnx(folder, provider, s.parallel, max_length, s.step_tokens)
    return replace(unsplit(estimate), n_ctx_slot=max_length)


# One entry per format of localserve.formats.FORMATS that the engine can run; the worker builds
# them (engine/worker_process/runtimes.py).
_ESTIMATES: dict[str, Callable[[ModelRef, Settings, int | None], LayeredEstimate]] = {
    "gguf": _estimate_gguf,
    "onnx": _estimate_onnx,
}


def _estimate(ref: ModelRef) -> Callable[[ModelRef, Settings, int | None], LayeredEstimate]:
    estimate = _ESTIMATES.get(ref.format)
    if estimate is None:
        raise LoadFailed(f"cannot load '{ref.name}': unsupported model format '{ref.format}'")
    return estimate
