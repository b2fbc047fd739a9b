"""Long prefills keep the stream alive (#44): while nothing is ready to send, each SSE stream
gets a comment every second, which every SSE reader skips; Anthropic's comes before its
message_start, since no event may. The daemon's worker runs every step 2.5 s slower here
(LOCALSERVE_TEST_FAULT=slow-steps), as a long prompt's prefill would take."""

from __future__ import annotations

import json
from collections.abc import Iterator

import anthropic
import httpx
import openai
import pytest

from tests.support.daemons import discard
from tests.support.helpers import MODEL
from tests.support.live import CLIENT_TIMEOUT_S, start_daemon

KEEPALIVE = b": keep-alive"
HELLO = [{"role": "user", "content": "Say hi."}]


@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    env = {"LOCALSERVE_TEST_FAULT": "slow-steps:2500"}
    proc, u = start_daemon(["--model", MODEL, "--parallel", "1", "--ctx", "512"], env=env)
    try:
        yield u
    finally:
        discard(proc)


def raw_stream(url: str, path: str, body: dict) -> list[bytes]:
    """The stream's lines, as they came."""
    with httpx.stream("POST", url + path, json=body, timeout=CLIENT_TIMEOUT_S) as r:
        assert r.status_code == 200
        return [line.encode() for line in r.iter_lines()]


def first_data(lines: list[bytes]) -> int:
    return next(i for i, line in enumerate(lines) if line.startswith((b"data:", b"event:")))


def test_a_chat_stream_sends_keepalives_before_its_first_token(url: str) -> None:
    body = {"model": MODEL, "messages": HELLO, "max_tokens": 2, "stream": True}
    lines = raw_stream(url, "/v1/chat/completions", body)
    # The role's opening delta goes first; the keep-alives fill the prefill after it.
    second = next(i for i, line in enumerate(lines) if line.startswith(b"data:") and i > 0)
    assert KEEPALIVE in lines[:second]


def test_an_anthropic_stream_sends_keepalives_before_message_start(url: str) -> None:
    body = {"model": MODEL, "messages": HELLO, "max_tokens": 2, "stream": True}
    lines = raw_stream(url, "/v1/messages", body)
    assert KEEPALIVE in lines[: first_data(lines)]
    assert lines[first_data(lines)] == b"event: message_start"


def test_a_responses_stream_sends_keepalives_after_its_created_events(url: str) -> None:
    body = {"model": MODEL, "input": "Say hi.", "max_output_tokens": 2, "stream": True}
    lines = raw_stream(url, "/v1/responses", body)
    events = [json.loads(line[5:])["type"] for line in lines if line.startswith(b"data:")]
    assert events[:2] == ["response.created", "response.in_progress"]
    assert KEEPALIVE in lines


def test_the_official_clients_read_through_the_keepalives(url: str) -> None:
    oa = openai.OpenAI(base_url=f"{url}/v1", api_key="none", max_retries=0)
    chunks = list(
        oa.chat.completions.create(model=MODEL, messages=HELLO, max_tokens=2, stream=True)
    )
    assert chunks[-1].choices[0].finish_reason == "length"
    an = anthropic.Anthropic(base_url=url, api_key="none", max_retries=0, timeout=60)
    with an.messages.stream(model=MODEL, messages=HELLO, max_tokens=2) as stream:
        assert stream.get_final_message().stop_reason == "max_tokens"
