"""A body that parses but is not text: JSON may escape a lone UTF-16 surrogate ("\\ud800"),
which no UTF-8 text, tokenizer or log can carry. Every face answers it 400, saying so, in its
own error format (it was a 500 from inside the tokenizer). The official clients cannot send
one (they encode their JSON as UTF-8 first), so these requests go as raw HTTP.

A surrogate pair ("\\ud83d\\ude00", how ensure_ascii writes an emoji) is one character, and
fine.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.support.helpers import MODEL, assert_openai_error_shape, raw_request

LONE = '"\\ud800"'  # as JSON text: valid JSON, and no text at all
HI = [{"role": "user", "content": "__"}]

# A body per face, whose one marked string becomes the lone surrogate.
FACES: dict[str, dict[str, Any]] = {
    "/v1/chat/completions": {"model": MODEL, "max_tokens": 1, "messages": HI},
    "/v1/completions": {"model": MODEL, "max_tokens": 1, "prompt": "__"},
    "/v1/embeddings": {"model": MODEL, "input": "__"},
    "/v1/responses": {"model": MODEL, "max_output_tokens": 1, "input": "__"},
    "/v1/messages": {"model": MODEL, "max_tokens": 1, "messages": HI},
    "/api/chat": {"model": MODEL, "stream": False, "messages": HI},
    "/api/generate": {"model": MODEL, "stream": False, "prompt": "__"},
    "/api/embed": {"model": MODEL, "input": "__"},
    "/api/embeddings": {"model": MODEL, "prompt": "__"},
    "/api/admin/import": {"path": "__"},
}


def body_with(face: str, lone: str = LONE) -> bytes:
    return json.dumps(FACES[face]).replace('"__"', lone).encode()


def post(url: str, path: str, body: bytes) -> tuple[int, Any]:
    status, _, answer = raw_request(f"{url}{path}", "POST", body)
    return status, answer


def error_message(path: str, body: Any) -> str:
    """The message, once the body is proved to be in the face's own error format."""
    if path.startswith("/api/"):
        assert isinstance(body, dict) and set(body) == {"error"}, body
        return str(body["error"])
    if path == "/v1/messages":
        assert body["type"] == "error" and body["error"]["type"] == "invalid_request_error", body
        return str(body["error"]["message"])
    error = assert_openai_error_shape(body)
    assert error["type"] == "invalid_request_error", body
    return str(error["message"])


@pytest.mark.parametrize("path", list(FACES))
def test_a_lone_surrogate_is_a_400_in_the_faces_own_format(daemon_url: str, path: str) -> None:
    status, answer = post(daemon_url, path, body_with(path))
    assert status == 400, answer
    message = error_message(path, answer)
    assert "not valid text" in message and "\\ud800" in message, message


def test_the_raw_bytes_of_a_surrogate_are_a_400_too(daemon_url: str) -> None:
    # Python's JSON decoder reads bytes with "surrogatepass": ED A0 80 becomes U+D800.
    body = body_with("/v1/chat/completions", '"__"').replace(b"__", b"\xed\xa0\x80")
    status, answer = post(daemon_url, "/v1/chat/completions", body)
    assert status == 400, answer
    assert "not valid text" in error_message("/v1/chat/completions", answer)


def test_a_utf16_body_holding_a_lone_surrogate_is_a_400(daemon_url: str) -> None:
    # Python's decoder still reads UTF-16 JSON (RFC 8259 once allowed it): there the surrogate
    # is a code unit of its own, with no escape to see.
    text = json.dumps(FACES["/api/generate"]).replace('"__"', '"\ud800"')
    body = json.loads(text)  # the real lone surrogate, in a str
    raw = json.dumps(body, ensure_ascii=False).encode("utf-16-le", "surrogatepass")
    status, answer = post(daemon_url, "/api/generate", raw)
    assert status == 400, answer
    assert "not valid text" in error_message("/api/generate", answer)


def test_a_lone_surrogate_in_a_key_is_a_400(daemon_url: str) -> None:
    body = json.dumps({**FACES["/api/chat"], "__": 1}).replace('"__"', LONE).encode()
    status, answer = post(daemon_url, "/api/chat", body)
    assert status == 400, answer
    assert "not valid text" in error_message("/api/chat", answer)


def test_a_lone_surrogate_in_a_stop_string_is_a_400(daemon_url: str) -> None:
    chat = {"model": MODEL, "max_tokens": 1, "messages": [{"role": "user", "content": "hi"}]}
    body = json.dumps({**chat, "stop": ["__"]}).replace('"__"', LONE).encode()
    status, answer = post(daemon_url, "/v1/chat/completions", body)
    assert status == 400, answer
    assert "not valid text" in error_message("/v1/chat/completions", answer)


def test_a_lone_surrogate_in_past_tool_call_arguments_is_a_400(daemon_url: str) -> None:
    # The arguments are JSON inside a string: the escape is there only once they are parsed.
    messages = [
        {"role": "user", "content": "hi"},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "f", "arguments": '{"a": "\\ud800"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "ok"},
    ]
    body = {"model": MODEL, "max_tokens": 1, "messages": messages}
    status, answer = post(daemon_url, "/v1/chat/completions", json.dumps(body).encode())
    assert status == 400, answer
    message = error_message("/v1/chat/completions", answer)
    assert "messages[1].tool_calls[0].function.arguments is not valid text" in message


def test_a_lone_surrogate_in_past_function_call_arguments_is_a_400_on_responses(
    daemon_url: str,
) -> None:
    body = {
        "model": MODEL,
        "max_output_tokens": 1,
        "input": [
            {
                "type": "function_call",
                "call_id": "c1",
                "name": "f",
                "arguments": '{"a": "\\ud800"}',
            },
            {"type": "function_call_output", "call_id": "c1", "output": "ok"},
        ],
        "tools": [{"type": "function", "name": "f", "parameters": {"type": "object"}}],
    }
    status, answer = post(daemon_url, "/v1/responses", json.dumps(body).encode())
    assert status == 400, answer
    assert "arguments is not valid text" in error_message("/v1/responses", answer)


def test_an_escaped_surrogate_pair_is_one_character_and_answered(daemon_url: str) -> None:
    status, answer = post(
        daemon_url, "/v1/chat/completions", body_with("/v1/chat/completions", '"\\ud83d\\ude00"')
    )
    assert status == 200, answer
