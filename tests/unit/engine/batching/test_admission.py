"""The admission queue every batcher waits in: its bound, its context check, its order (pure
logic: no batcher, no model)."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from localserve.engine.batching.admission import AdmissionQueue
from localserve.ground.errors import ContextOverflow, QueueFull


@dataclass(eq=False)
class Item:
    prompt_tokens: int = 2
    cancelled: bool = False


def queue(limit: int = 2, n_ctx: int = 8, reserve: int = 0) -> AdmissionQueue[Item]:
    return AdmissionQueue("fake", limit, n_ctx, reserve)


def test_a_request_past_the_bound_is_refused_with_queue_full() -> None:
    q = queue(limit=2)
    q.submit([Item()])
    q.submit([Item()])
    with pytest.raises(QueueFull, match="2 requests are already waiting"):
        q.submit([Item()])
    assert len(q) == 2


def test_a_request_that_would_pass_the_bound_is_refused_whole() -> None:
    q = queue(limit=2)
    q.submit([Item()])
    with pytest.raises(QueueFull):
        q.submit([Item(), Item()])
    assert len(q) == 1


def test_a_request_larger_than_the_whole_bound_is_taken_when_nothing_waits() -> None:
    q = queue(limit=2)
    q.submit([Item(), Item(), Item()])
    assert len(q) == 3


def test_a_prompt_that_leaves_no_room_for_its_reserve_is_refused_with_context_overflow() -> None:
    q = queue(n_ctx=8, reserve=1)
    q.submit([Item(prompt_tokens=7)])
    with pytest.raises(ContextOverflow, match="8 tokens") as err:
        q.submit([Item(prompt_tokens=8)], "messages")
    assert err.value.param == "messages" and len(q) == 1


def test_items_are_taken_oldest_first() -> None:
    q = queue(limit=3)
    first, second = Item(), Item()
    q.submit([first])
    q.submit([second])
    assert q.head() is first
    assert [q.take(), q.take(), q.take()] == [first, second, None]


def test_items_put_back_go_to_the_head_in_their_order_past_the_bound() -> None:
    q = queue(limit=1)
    waiting, a, b = Item(), Item(), Item()
    q.submit([waiting])
    q.put_back([a, b])
    assert [q.take(), q.take(), q.take()] == [a, b, waiting]


def test_reaping_takes_out_only_the_cancelled_items() -> None:
    q = queue(limit=3)
    kept, gone = Item(), Item(cancelled=True)
    q.submit([kept])
    q.submit([gone])
    assert q.reap() == [gone]
    assert len(q) == 1 and q.head() is kept
