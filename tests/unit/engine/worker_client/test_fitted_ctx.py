"""An automatic context (engine/worker_client/sizing.py's fitted_ctx) is found for every trained
context and every room (#57): the search ends, and it ends on the most that fits. A trained
context that is no multiple of 256 once made it loop for ever (200,000 tokens, with room for a
little less), and each /v1/models call pinned one more thread.

The estimate is faked as a cost that grows with the context; the fake refuses to be asked more
often than a binary search over the steps needs, so a search that does not end fails here
rather than hangs."""

from __future__ import annotations

from dataclasses import dataclass
from typing import cast

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from localserve.engine.worker_client import sizing
from localserve.engine.worker_client.sizing import CTX_STEP, MIN_AUTO_CTX, fitted_ctx
from localserve.formats.gguf_header import GGUFHeader
from localserve.ground.settings import Settings

BASE = 1 << 30  # weights, whatever the context
PER_TOKEN = 1 << 17  # the KV cache of every slot, per token of context
MAX_TRAINED = 1 << 40
# Contexts up to 2**40 are 2**32 steps: 32 halvings, one try of the trained context, and a margin.
MAX_ESTIMATES = 40


def cost(ctx: int) -> int:
    return BASE + PER_TOKEN * ctx


@dataclass
class Header:
    """The one thing fitted_ctx reads of a GGUF header: its trained context."""

    trained: int

    def arch_value(self, key: str, default: object = None) -> object:
        assert key == "context_length"
        return self.trained


@dataclass
class Estimate:
    total: int

    @property
    def whole(self) -> Estimate:
        return self


def fitted(trained: int, room: int | None, asked: list[int] | None = None) -> int:
    """fitted_ctx over the faked estimate; `asked` collects the contexts it sized, in order."""
    contexts = [] if asked is None else asked

    def layered(header: object, s: object, ctx: int, prompt_cache: int, kv: float) -> Estimate:
        contexts.append(ctx)
        assert len(contexts) <= MAX_ESTIMATES, f"the search does not end: {contexts[-6:]}"
        return Estimate(cost(ctx))

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(sizing, "_layered_gguf", layered)
        return fitted_ctx(cast(GGUFHeader, Header(trained)), Settings(), room)


def test_a_trained_context_of_200000_with_room_for_a_little_less_ends_on_the_last_step() -> None:
    assert fitted(200_000, cost(200_000) - 1) == 781 * CTX_STEP  # 199,936


def test_a_trained_context_of_1010000_with_room_for_a_little_less_ends_on_the_last_step() -> None:
    assert fitted(1_010_000, cost(1_010_000) - 1) == 3945 * CTX_STEP  # 1,009,920


@settings(max_examples=500, deadline=None, database=None)
@given(
    trained=st.integers(1, MAX_TRAINED),
    below=st.integers(0, 4 * CTX_STEP) | st.integers(0, MAX_TRAINED),  # mostly near the top
    offset=st.integers(-PER_TOKEN, PER_TOKEN),
)
@example(trained=200_000, below=1, offset=0)
@example(trained=1_010_000, below=1, offset=0)
@example(trained=200_000, below=0, offset=-1)
@example(trained=MIN_AUTO_CTX - 1, below=0, offset=-1)
def test_the_search_ends_on_the_most_that_fits_for_every_trained_context_and_room(
    trained: int, below: int, offset: int
) -> None:
    # A room near the cost of some context at or below the trained one, where the steps lie.
    room = max(0, cost(max(0, trained - below)) + offset)
    ctx = fitted(trained, room)
    floor = min(MIN_AUTO_CTX, trained)
    if cost(trained) <= room:
        assert ctx == trained
    elif ctx == floor:  # the floor, where the next step up is the trained context or no fit
        step = (floor // CTX_STEP + 1) * CTX_STEP
        assert step >= trained or cost(step) > room
    else:
        assert ctx % CTX_STEP == 0 and floor < ctx < trained
        assert cost(ctx) <= room < cost(ctx + CTX_STEP)


def test_with_no_bound_on_room_the_trained_context_is_taken_without_sizing_it() -> None:
    asked: list[int] = []
    assert fitted(200_000, None, asked) == 200_000
    assert asked == []
