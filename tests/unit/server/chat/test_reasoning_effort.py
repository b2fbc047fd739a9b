"""OpenAI's reasoning effort (server/chat/plan.py `read_effort`): one of its levels, or a 400
naming the field the face reads it from."""

from __future__ import annotations

import pytest

from localserve.ground.errors import BadRequest
from localserve.server.chat.plan import EFFORTS, read_effort


@pytest.mark.parametrize("level", EFFORTS)
def test_every_openai_level_is_taken(level: str) -> None:
    assert read_effort(level, "reasoning_effort", "reasoning_effort") == level


def test_absent_is_no_choice() -> None:
    assert read_effort(None, "reasoning_effort", "reasoning_effort") is None


@pytest.mark.parametrize("value", ["extreme", "HIGH", 3, True, {"level": "high"}])
def test_any_other_value_is_refused_naming_the_field(value: object) -> None:
    with pytest.raises(BadRequest) as caught:
        read_effort(value, "reasoning.effort", "reasoning")
    assert caught.value.param == "reasoning" and "'reasoning.effort' must be one of" in str(
        caught.value
    )
