"""What one client may make the daemon hold or do: each bound is a clear 4xx in the face's own
error format, and the daemon serves on afterwards (connections: test_connections.py)."""

from __future__ import annotations

import json
import re
import socket
import time

import anthropic
import pytest

from tests.support.daemons import post_json, raw_request
from tests.support.helpers import MODEL
from tests.support.live import CLIENT_TIMEOUT_S

ASK = [{"role": "user", "content": "What is the capital of France?"}]


def chat(url: str, **extra) -> tuple[int, dict]:
    return post_json(
        f"{url}/v1/chat/completions", {"model": MODEL, "messages": ASK, "max_tokens": 4, **extra}
    )


@pytest.fixture
def small(daemon_factory) -> str:
    """A daemon with small bounds, to reach them cheaply."""
    _, url = daemon_factory(
        [
            "--no-default-model",
            "--max-body",
            "64KiB",
            "--body-timeout",
            "1",
            "--max-connections",
            "8",
            "--max-json-values",
            "100",
        ]
    )
    return url


# -- bodies --------------------------------------------------------------------------------------


def test_a_body_larger_than_max_body_is_a_413_in_openai_shape(small) -> None:
    body = json.dumps({"model": MODEL, "messages": [{"role": "user", "content": "x" * 70_000}]})
    status, _, answer = raw_request(f"{small}/v1/chat/completions", "POST", body.encode())
    assert status == 413 and "max_body" in answer["error"]["message"]


def test_a_small_endpoint_takes_a_small_body_only(small) -> None:
    body = json.dumps({"model": "x" * (2 << 20)}).encode()
    status, _, answer = raw_request(f"{small}/api/show", "POST", body)
    assert status == 413 and "error" in answer


def test_an_agents_conversation_past_a_mebibyte_is_taken_by_the_messages_face(daemon_url) -> None:
    # Claude Code's long sessions pass 1 MiB: the agents' faces take max_body, as chat does.
    client = anthropic.Anthropic(base_url=daemon_url, api_key="x", timeout=CLIENT_TIMEOUT_S)
    long = [{"role": "user", "content": "word " * 300_000}]
    counted = client.messages.count_tokens(model=MODEL, messages=long)
    assert counted.input_tokens > 250_000


@pytest.mark.parametrize("depth", [65, 100_000])
def test_json_nested_too_deep_is_a_400(daemon_url, depth) -> None:
    body = ("[" * depth + "]" * depth).encode()
    status, _, answer = raw_request(f"{daemon_url}/api/chat", "POST", body)
    assert status == 400 and "deeper" in answer["error"]


@pytest.mark.parametrize("path", ["/v1/chat/completions", "/api/chat", "/v1/messages"])
def test_more_json_values_than_max_json_values_is_a_413_in_the_faces_shape(small, path) -> None:
    body = json.dumps({"model": MODEL, "max_tokens": 4, "messages": ASK * 200}).encode()
    status, _, answer = raw_request(f"{small}{path}", "POST", body)
    assert status == 413, answer
    if path == "/api/chat":
        assert set(answer) == {"error"} and "(max_json_values)" in answer["error"]
    elif path == "/v1/messages":
        assert answer["type"] == "error" and "(max_json_values)" in answer["error"]["message"]
    else:
        assert answer["error"]["code"] == "max_json_values"
        assert re.match(r"the request body holds \d+ JSON values", answer["error"]["message"])


def test_token_ids_past_a_slots_context_are_refused_as_a_context_overflow(daemon_url) -> None:
    # Refused before a walk over the ids: a body's worth of them held the loop for seconds.
    prompt = [1] * 500_000  # within max_json_values
    status, answer = post_json(
        f"{daemon_url}/v1/completions", {"model": MODEL, "prompt": prompt, "max_tokens": 1}
    )
    assert status == 400 and answer["error"]["code"] == "context_length_exceeded"
    assert "the prompt has 500000 tokens" in answer["error"]["message"]


def test_a_body_that_trickles_in_is_cut_off_with_a_408(small) -> None:
    host, port = small.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=10) as s:
        s.sendall(
            b"POST /api/generate HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            b"Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n{"
        )
        started = time.monotonic()
        answer = b""
        while b"\r\n\r\n" not in answer:
            s.sendall(b" ")  # a byte now and then, never the whole body
            time.sleep(0.2)
            answer += s.recv(4096) if _readable(s) else b""
            assert time.monotonic() - started < 10, "never cut off"
    assert answer.startswith(b"HTTP/1.1 408")


def _readable(s: socket.socket) -> bool:
    import select

    return bool(select.select([s], [], [], 0)[0])


# -- fields --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "stop, words",
    [
        (["x"] * 65, "at most 64"),
        (["y" * 257], "longer than 256"),
        ([f"s{i}" for i in range(10_000)], "at most 64"),
    ],
)
def test_too_many_or_too_long_stop_strings_are_a_400(daemon_url, stop, words) -> None:
    status, answer = chat(daemon_url, stop=stop)
    assert status == 400 and words in answer["error"]["message"]
    assert answer["error"]["param"] == "stop"


def test_ollama_stop_strings_have_the_same_bound(daemon_url) -> None:
    status, answer = post_json(
        f"{daemon_url}/api/generate",
        {"model": MODEL, "prompt": "Hi", "options": {"stop": ["z"] * 65}},
    )
    assert status == 400 and "at most 64" in answer["error"]


def test_an_unknown_message_role_is_a_400_naming_the_roles(daemon_url) -> None:
    status, answer = chat(daemon_url, messages=[{"role": "wizard", "content": "Hi"}])
    assert status == 400 and "'wizard'" in answer["error"]["message"]


def test_the_developer_role_is_the_system_message(client) -> None:
    answer = client.chat.completions.create(
        model=MODEL, max_tokens=4, messages=[{"role": "developer", "content": "Be brief."}, *ASK]
    )
    assert answer.choices[0].message.content


@pytest.mark.parametrize(
    "bias, words",
    [
        ({"999999999": 5}, "outside this model's vocabulary"),
        ({"12": 101}, "-100..100"),
        ({"twelve": 1}, "not a token id"),
    ],
)
def test_a_bad_logit_bias_is_a_400(daemon_url, bias, words) -> None:
    status, answer = chat(daemon_url, logit_bias=bias)
    assert status == 400 and words in answer["error"]["message"]
    assert answer["error"]["param"] == "logit_bias"


def test_logit_bias_is_honoured(ollama_url_tokens, client) -> None:
    prompt, first = ollama_url_tokens
    plain = client.completions.create(model=MODEL, prompt=prompt, max_tokens=1, temperature=0)
    banned = client.completions.create(
        model=MODEL, prompt=prompt, max_tokens=1, temperature=0, logit_bias={str(first): -100}
    )
    assert plain.choices[0].text != banned.choices[0].text


@pytest.fixture
def ollama_url_tokens(daemon_url) -> tuple[list[int], int]:
    """A prompt's token ids and the first token greedy SmolLM2 answers it with."""
    _, answer = post_json(
        f"{daemon_url}/api/generate",
        {
            "model": MODEL,
            "prompt": "What is the capital of France?",
            "stream": False,
            "options": {"temperature": 0, "num_predict": 1},
        },
    )
    context = answer["context"]
    return context[:-1], context[-1]


def test_max_tokens_beyond_a_slots_context_is_clamped_to_it(client) -> None:
    """An upper bound, never a refusal (#44): the answer stays within the slot's 1024 tokens."""
    answer = client.chat.completions.create(model=MODEL, messages=ASK, max_tokens=1_000_000)
    assert answer.usage.prompt_tokens + answer.usage.completion_tokens <= 1024
