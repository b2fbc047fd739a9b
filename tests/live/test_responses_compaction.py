"""Codex's compaction (#44): POST /v1/responses/compact summarizes a conversation into its user
messages and one `compaction` item; a later request sends those items in place of the turns,
and the summary is back in the prompt."""

from __future__ import annotations

import json

from tests.support.daemons import post_json, raw_request
from tests.support.helpers import MODEL

CONVERSATION = [
    {"role": "user", "content": "My name is Ada and I am fixing a bug in parser.py."},
    {"role": "assistant", "content": "Hello Ada. What does the bug do?"},
    {"role": "user", "content": "It drops the last line of the file."},
]


def test_compact_answers_the_user_messages_then_one_compaction_item(daemon_url) -> None:
    body = {"model": MODEL, "input": CONVERSATION, "max_output_tokens": 40}
    status, answer = post_json(f"{daemon_url}/v1/responses/compact", body)
    assert status == 200, answer
    assert answer["object"] == "response.compaction"
    *kept, compaction = answer["output"]
    assert [m["content"][0]["text"] for m in kept] == [
        m["content"] for m in CONVERSATION if m["role"] == "user"
    ]
    assert compaction["type"] == "compaction" and compaction["encrypted_content"]
    assert answer["usage"]["output_tokens"] > 0


def test_a_compaction_item_puts_its_summary_back_into_the_prompt(daemon_url) -> None:
    compaction = {"type": "compaction", "encrypted_content": "Ada fixes parser.py. " * 20}
    ask = {"role": "user", "content": "Go on."}
    with_it = {"model": MODEL, "input": [compaction, ask], "max_output_tokens": 1}
    without = {"model": MODEL, "input": [ask], "max_output_tokens": 1}
    url = f"{daemon_url}/v1/responses"
    longer = post_json(url, with_it)[1]["usage"]["input_tokens"]
    assert longer > post_json(url, without)[1]["usage"]["input_tokens"] + 80


def test_a_compaction_item_without_its_content_is_a_400(daemon_url) -> None:
    body = {"model": MODEL, "input": [{"type": "compaction"}, {"role": "user", "content": "Hi"}]}
    status, _, answer = raw_request(f"{daemon_url}/v1/responses", "POST", json.dumps(body).encode())
    assert status == 400 and answer["error"]["param"] == "input"


OLD_SUMMARY = {"type": "compaction", "encrypted_content": "Ada fixes parser.py; it drops lines."}
SINCE = [
    {"role": "user", "content": "Now the tests fail on empty files."},
    {"role": "assistant", "content": "Which test fails?"},
    {"role": "user", "content": "test_empty in test_parser.py."},
]


def test_a_re_compaction_keeps_one_summary_and_the_user_messages_since_the_last(
    daemon_url,
) -> None:
    earlier = [*CONVERSATION, OLD_SUMMARY]
    body = {"model": MODEL, "input": [*earlier, *SINCE], "max_output_tokens": 40}
    status, answer = post_json(f"{daemon_url}/v1/responses/compact", body)
    assert status == 200, answer
    *kept, compaction = answer["output"]
    assert [m["content"][0]["text"] for m in kept] == [
        m["content"] for m in SINCE if m["role"] == "user"
    ]
    assert compaction["type"] == "compaction"


def test_the_turns_before_the_newest_summary_are_not_summarized_again(daemon_url) -> None:
    url = f"{daemon_url}/v1/responses/compact"
    again = [*CONVERSATION, OLD_SUMMARY] * 3
    with_past = {"model": MODEL, "input": [*again, *SINCE], "max_output_tokens": 1}
    without = {"model": MODEL, "input": [OLD_SUMMARY, *SINCE], "max_output_tokens": 1}
    assert (
        post_json(url, with_past)[1]["usage"]["input_tokens"]
        == post_json(url, without)[1]["usage"]["input_tokens"]
    )
