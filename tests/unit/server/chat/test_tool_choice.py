"""`tool_choice` without tools (server/chat/tool_calls.py `read_tools`): a call required of no
tools cannot be honoured, so it is a 400 naming tool_choice; `auto` and `none` ask for nothing."""

from __future__ import annotations

import pytest

from localserve.ground.errors import BadRequest
from localserve.server.chat.tool_calls import read_tools

NAMED = {"type": "function", "function": {"name": "get_time"}}


@pytest.mark.parametrize("tools", [None, []])
@pytest.mark.parametrize("choice", ["required", NAMED])
def test_a_required_or_named_call_without_tools_is_refused(tools, choice) -> None:
    with pytest.raises(BadRequest) as caught:
        read_tools({"tools": tools, "tool_choice": choice})
    assert caught.value.param == "tool_choice"


@pytest.mark.parametrize("choice", [None, "auto", "none"])
def test_auto_or_none_without_tools_is_a_plain_answer(choice) -> None:
    assert read_tools({"tool_choice": choice}) is None


def test_a_malformed_tool_choice_without_tools_is_refused_too() -> None:
    with pytest.raises(BadRequest) as caught:
        read_tools({"tool_choice": "always"})
    assert caught.value.param == "tool_choice"
