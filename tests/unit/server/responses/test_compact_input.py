"""What a re-compaction reads of its input (server/responses/compact.py): the newest summary
and what follows it, with the instructions sent before it; every earlier turn and summary is
in that summary already."""

from __future__ import annotations

from typing import Any

from localserve.server.responses.compact import since_newest_summary

USER = {"role": "user", "content": "fix parser.py"}
ANSWER = {"type": "message", "role": "assistant", "content": "done"}
SYSTEM = {"role": "system", "content": "be brief"}
DEVELOPER = {"type": "message", "role": "developer", "content": "sandboxed"}


def summary(text: str) -> dict[str, Any]:
    return {"type": "compaction", "encrypted_content": text}


def test_an_input_never_compacted_is_read_whole() -> None:
    assert since_newest_summary([USER, ANSWER]) == ([USER, ANSWER], -1)


def test_the_turns_and_summaries_before_the_newest_summary_are_dropped() -> None:
    items = [USER, summary("one"), ANSWER, USER, summary("two"), ANSWER, USER]
    assert since_newest_summary(items) == ([summary("two"), ANSWER, USER], 0)


def test_the_instructions_before_the_newest_summary_are_kept_before_it() -> None:
    items = [SYSTEM, USER, summary("one"), DEVELOPER, ANSWER, summary("two"), USER]
    assert since_newest_summary(items) == ([SYSTEM, DEVELOPER, summary("two"), USER], 2)


def test_an_input_that_is_no_list_is_left_for_the_request_reader_to_refuse() -> None:
    assert since_newest_summary("hello") == ("hello", -1)
    assert since_newest_summary(None) == (None, -1)
