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
