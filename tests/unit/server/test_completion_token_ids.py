"""A /v1/completions prompt of token ids (#57): one longer than the slot's context is refused
before any id is looked at (a 16 MiB body holds 8 million of them: 3.6 s of Python on the event
loop), and one within it is checked as before."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

import pytest

from localserve.ground.errors import BadRequest, ContextOverflow
from localserve.server.openai.completions import _echoed, _encode_prompt

CTX = 16


class Model:
    """A resident model of a CTX-token slot that counts the ids it was asked to check."""

    info = SimpleNamespace(n_ctx_slot=CTX)

    def __init__(self) -> None:
        self.checked = 0

    def check_token_ids(self, tokens: list[int], field: str = "prompt") -> list[int]:
        self.checked += len(tokens)
        return tokens


def encode(prompt: Any, model: Model | None = None) -> list[int]:
    return asyncio.run(_encode_prompt(model or Model(), prompt, None))  # type: ignore[arg-type]


def test_ids_past_the_slots_context_are_a_context_overflow_before_any_is_checked() -> None:
    model = Model()
    # Not ids past the first: a walk over them would have refused the prompt as no ids.
    with pytest.raises(ContextOverflow, match=f"has {CTX + 1} tokens.*per slot is {CTX}"):
        encode([1] + ["x"] * CTX, model)
    assert model.checked == 0


def test_ids_that_fill_the_slots_context_are_checked_and_kept() -> None:
    model = Model()
    assert encode(list(range(CTX)), model) == list(range(CTX))
    assert model.checked == CTX


@pytest.mark.parametrize("prompt", [[1, True], [True, 1], [1, 2.0], [1, "2"], [None], []])
def test_a_list_that_is_not_all_ids_is_refused_as_the_prompt(prompt: list[Any]) -> None:
    with pytest.raises(BadRequest, match="'prompt' must be a string or a list of token ids"):
        encode(prompt)


def test_echo_of_ids_is_refused_by_the_first_id() -> None:
    with pytest.raises(BadRequest, match="token ids are not echoed"):
        _echoed([1] + ["x"] * 1000)
    assert _echoed(["text"]) == "text"
