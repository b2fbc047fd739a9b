"""One log line per request at its end, with the id the answer's X-Request-Id header gives;
`--log-format json` for machines; prompts only with `--log-prompts`."""

from __future__ import annotations

import json
from collections.abc import Iterator

import httpx
import openai
import pytest

from tests.support.daemons import log_text, poll
from tests.support.live import CLIENT_TIMEOUT_S, running_daemon

ASK = [{"role": "user", "content": "The secret word is periwinkle. Say hello."}]
ARGS = ["--model", "smollm2", "--parallel", "2", "--ctx", "1024"]


@pytest.fixture(scope="module")
def daemon() -> Iterator[tuple]:
    with running_daemon(ARGS) as started:
        yield started


def lines_with(log_path: str, text: str) -> list[str]:
    return [line for line in log_text(log_path).splitlines() if text in line]


def test_a_streamed_request_logs_one_line_with_the_id_from_its_header(daemon: tuple) -> None:
    proc, url = daemon
    ai = openai.OpenAI(base_url=f"{url}/v1", api_key="none", timeout=CLIENT_TIMEOUT_S)
    raw = ai.chat.completions.with_raw_response.create(
        model="smollm2", messages=ASK, max_tokens=6, temperature=0, stream=True
    )
    rid = raw.headers["x-request-id"]
    chunks = list(raw.parse())
    assert chunks
    line = poll("the request's line", lambda: lines_with(proc.log_path, f"request {rid} "), 30)
    assert len(line) == 1
    assert f"request {rid} openai /v1/chat/completions smollm2 200 prompt=" in line[0]
    for field in ("cached=", "generated=6", "ttft=", "total=", "ended=length"):
        assert field in line[0]
    assert "periwinkle" not in log_text(proc.log_path)  # prompts stay out of the log


def test_a_clients_request_id_is_echoed_and_logged(daemon: tuple) -> None:
    proc, url = daemon
    answer = httpx.post(
        f"{url}/api/generate",
        headers={"X-Request-Id": "editor-42"},
        json={"model": "smollm2", "prompt": "Hi", "stream": False, "options": {"num_predict": 3}},
        timeout=CLIENT_TIMEOUT_S,
    )
    assert answer.headers["x-request-id"] == "editor-42"
    line = poll("the line", lambda: lines_with(proc.log_path, "request editor-42 "), 30)
    assert " ollama /api/generate smollm2 200 " in line[0]


def test_an_unusable_client_id_is_replaced_by_a_new_one(daemon: tuple) -> None:
    _, url = daemon
    answer = httpx.get(f"{url}/api/tags", headers={"X-Request-Id": "bad id\twith spaces"})
    assert answer.headers["x-request-id"] != "bad id\twith spaces"
    assert len(answer.headers["x-request-id"]) == 32


def test_json_logs_carry_the_request_as_fields_and_prompts_when_asked() -> None:
    with running_daemon([*ARGS, "--log-format", "json", "--log-prompts"]) as (proc, url):
        httpx.post(
            f"{url}/v1/chat/completions",
            headers={"X-Request-Id": "j-1"},
            json={"model": "smollm2", "messages": ASK, "max_tokens": 3},
            timeout=CLIENT_TIMEOUT_S,
        )
        found = poll("the line", lambda: lines_with(proc.log_path, '"j-1"'), 30)
        entry = json.loads(found[0])
        assert entry["level"] == "INFO" and entry["logger"] == "localserve.requests"
        request = entry["request"]
        assert (request["id"], request["face"], request["model"], request["status"]) == (
            "j-1",
            "openai",
            "smollm2",
            200,
        )
        assert request["generated_tokens"] == 3 and request["ended"] == "length"
        assert request["prompt"] == ASK
