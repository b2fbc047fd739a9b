"""An automatic context (#44): each model's trained context, or as much of it as the room holds
with every slot, never below 4096, as llama.cpp's --fit chooses; `--ctx` pins it. Sized on the
embedded SmolLM2's real header (trained for 8192 tokens)."""

from __future__ import annotations

from dataclasses import replace
from typing import cast

from localserve.engine.residency.loader import Loader, grown_ctx
from localserve.engine.residency.placement import answers
from localserve.engine.worker_client.placement import Placement
from localserve.engine.worker_client.sizing import CTX_STEP, MIN_AUTO_CTX, layered_estimate
from localserve.formats.offload import LayeredEstimate
from localserve.ground.model import ModelRef
from localserve.ground.pin import Pin
from localserve.ground.settings import Settings
from localserve.store.resolve import resolve
from tests.support.fakes import fake_pool

AUTO = Settings(parallel=4)
TRAINED = 8192


def size(ctx: int) -> int:
    return layered_estimate(resolve("smollm2"), replace(AUTO, ctx=ctx)).whole.total


def fitted(room: int | None, settings: Settings = AUTO) -> int:
    return layered_estimate(resolve("smollm2"), settings, room).n_ctx_slot


def test_with_no_bound_a_model_gets_its_trained_context() -> None:
    assert fitted(None) == TRAINED


def test_with_room_for_it_a_model_gets_its_trained_context() -> None:
    assert fitted(size(TRAINED)) == TRAINED


def test_with_less_room_the_context_is_the_most_that_fits() -> None:
    room = (size(MIN_AUTO_CTX) + size(TRAINED)) // 2
    ctx = fitted(room)
    assert MIN_AUTO_CTX < ctx < TRAINED and ctx % CTX_STEP == 0
    assert size(ctx) <= room < size(ctx + CTX_STEP)


def test_the_context_never_falls_below_4096_however_little_room() -> None:
    assert fitted(1) == MIN_AUTO_CTX


def test_the_ctx_setting_pins_the_context_whatever_the_room() -> None:
    assert fitted(1, replace(AUTO, ctx=1024)) == 1024
    assert fitted(None, replace(AUTO, ctx=16384)) == 16384


class RealEstimates:
    """The Loader's estimate, of the real header: what grown_ctx asks of a loader."""

    def estimate(self, ref: ModelRef, room: int | None = None, ctx: int = 0) -> LayeredEstimate:
        return layered_estimate(ref, replace(AUTO, ctx=ctx) if ctx else AUTO, room)


def grown(asked: int, budget: int) -> int:
    loader = cast(Loader, RealEstimates())
    return grown_ctx(loader, resolve("smollm2"), [fake_pool(budget)], asked)


def test_a_larger_num_ctx_grows_the_context_while_the_whole_budget_holds_it() -> None:
    assert grown(6144, size(6144)) == 6144


def test_a_larger_num_ctx_grows_the_context_up_to_the_trained_one() -> None:
    assert grown(100_000, size(TRAINED)) == TRAINED


def test_a_num_ctx_the_budget_cannot_hold_grows_nothing() -> None:
    assert grown(6144, size(6144) - 1) == 0


def test_a_model_placed_with_less_context_than_a_request_asks_is_reloaded_for_it() -> None:
    placed = Placement(device="cpu", gpu_layers=0, n_ctx_slot=4096)
    assert not answers(placed, Pin(ctx=8192))
    assert answers(placed, Pin(ctx=4096)) and answers(placed, Pin(ctx=2048))
