"""Inputs that were a 500 are each a 4xx in the face's own error format: found by reading the
code (issue #45), a key header that is not ASCII, an integer too long to be one, brackets a
UTF-16 body hid from the depth check, tool-call arguments nested past it and a keep_alive too
large to be a float; found by tests/live/test_fuzz_faces.py, a body its Content-Encoding cannot
decode and Ollama chat messages that are no list.

The app runs in this process with no model behind it: every refusal here comes before a
generation, and a request that reached one would fail the test with the fake's 500.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import replace
from types import SimpleNamespace
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer

from localserve.ground.sampling import SamplingParams
from localserve.ground.settings import OPERATOR_HEADER, Settings
from localserve.server.app import build_app
from localserve.server.http.bounded_json import MAX_DEPTH, MAX_INT_DIGITS
from localserve.server.http.guard import GUARD
from tests.support.helpers import assert_openai_error_shape

NOT_ASCII = "clé-ünïcode-✓"
JSON = "application/json"
HI = [{"role": "user", "content": "hi"}]


class NoTurns:
    """The model a request holds once its body is read: it names no tools format and refuses
    to run, so a request that gets past every check fails loudly."""

    name = "fake"
    info = SimpleNamespace(chat_template=None, n_ctx_slot=512)

    def check_token_ids(self, ids: list[int], field: str) -> None:
        pass

    def with_cap(self, params: SamplingParams) -> SamplingParams:
        return params

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"the request reached the model ({name}); it should be a 4xx")


class Manager(SimpleNamespace):
    @asynccontextmanager
    async def acquire(self, name: str, *more: object) -> AsyncIterator[NoTurns]:
        yield NoTurns()

    def deferred(self, model: NoTurns, pin: object) -> None:
        return None  # as the request's options asked


def ask(
    path: str,
    body: bytes | None = None,
    headers: dict[str, str] | None = None,
    operator: str | None = None,
    **settings: Any,
) -> tuple[int, Any]:
    """One request to a fresh app: (status, the answer's JSON)."""

    async def go() -> tuple[int, Any]:
        app = build_app(Manager(settings=replace(Settings(), **settings)))  # type: ignore[arg-type]
        if operator is not None:
            app[GUARD] = replace(app[GUARD], operator=operator)
        async with TestClient(TestServer(app)) as client:
            method = "GET" if body is None else "POST"
            sent = {"Content-Type": JSON, **(headers or {})}
            async with client.request(method, path, data=body, headers=sent) as r:
                return r.status, await r.json(content_type=None)

    return asyncio.run(go())


def assert_anthropic_error_shape(body: Any) -> dict[str, Any]:
    assert isinstance(body, dict) and body.get("type") == "error", body
    assert isinstance(body["error"], dict) and body["error"]["message"], body
    return body["error"]


def assert_ollama_error_shape(body: Any) -> str:
    assert isinstance(body, dict) and set(body) == {"error"}, body
    assert isinstance(body["error"], str) and body["error"], body
    return body["error"]


# -- key headers -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "headers",
    [{"X-Api-Key": NOT_ASCII}, {"Authorization": f"Bearer {NOT_ASCII}"}],
    ids=["x-api-key", "authorization"],
)
def test_a_key_that_is_not_ascii_is_a_wrong_key(headers: dict[str, str]) -> None:
    status, body = ask("/v1/models", headers=headers, api_key="the-key")
    assert status == 401, body
    assert "the API key is wrong" in assert_openai_error_shape(body)["message"]


def test_an_admin_key_that_is_not_ascii_is_a_wrong_admin_key() -> None:
    status, body = ask("/api/pull", b"{}", {"X-Api-Key": NOT_ASCII}, admin_key="admin")
    assert status == 403, body
    assert "admin key" in assert_ollama_error_shape(body)


def test_an_operator_token_that_is_not_ascii_is_no_operator() -> None:
    status, body = ask("/v1/messages", b"{}", {OPERATOR_HEADER: NOT_ASCII}, "token", api_key="k")
    assert status == 401, body
    assert "no API key was sent" in assert_anthropic_error_shape(body)["message"]


# -- the JSON body -----------------------------------------------------------------------------


def test_an_integer_too_long_for_python_is_a_400() -> None:
    body = b'{"model": "fake", "messages": [], "seed": ' + b"7" * 5000 + b"}"
    status, answer = ask("/v1/chat/completions", body)
    assert status == 400, answer
    message = assert_openai_error_shape(answer)["message"]
    assert f"integer of 5000 digits; no field takes more than {MAX_INT_DIGITS}" in message


def test_brackets_a_utf16_body_hides_behind_u2200_are_still_counted() -> None:
    # U+2200 is 00 22 in UTF-16-LE: its second byte is a quote's, so that to a count over the
    # raw bytes the brackets stand inside a string.
    nested = "[" * 5000 + "]" * 5000
    text = '{"model": "fake", "prompt": "\u2200", "options": ' + nested + ', "system": ""}'
    status, answer = ask("/api/generate", text.encode("utf-16-le"))
    assert status == 400, answer
    assert f"nests JSON deeper than {MAX_DEPTH} levels" in assert_ollama_error_shape(answer)


def test_a_keep_alive_of_400_digits_is_a_400() -> None:
    body = json.dumps({"model": "fake", "prompt": "hi", "keep_alive": 10**400}).encode()
    status, answer = ask("/api/generate", body)
    assert status == 400, answer
    assert "integer of 401 digits" in assert_ollama_error_shape(answer)


UPLOAD = b'--x\r\nContent-Disposition: form-data; name="purpose"\r\n\r\nbatch\r\n--x--\r\n'


@pytest.mark.parametrize(
    ("path", "body", "content_type"),
    [
        ("/v1/chat/completions", json.dumps({"model": "fake", "messages": HI}).encode(), JSON),
        ("/v1/files", UPLOAD, "multipart/form-data; boundary=x"),  # not read as JSON
    ],
    ids=["json", "upload"],
)
def test_a_body_its_content_encoding_cannot_decode_is_a_400(
    path: str, body: bytes, content_type: str
) -> None:
    headers = {"Content-Encoding": "gzip", "Content-Type": content_type}
    status, answer = ask(path, body, headers)
    assert status == 400, answer
    message = assert_openai_error_shape(answer)["message"]
    assert message == "the request body cannot be read: Can not decode content-encoding: gzip"


@pytest.mark.parametrize("messages", [7, True, 1.5])
def test_ollama_chat_messages_that_are_no_list_are_a_400(messages: object) -> None:
    status, answer = ask("/api/chat", json.dumps({"model": "fake", "messages": messages}).encode())
    assert status == 400, answer
    assert "'messages' must be a non-empty list" in assert_ollama_error_shape(answer)


def test_an_error_quoting_a_huge_value_cuts_its_middle_and_keeps_its_words() -> None:
    role = "x" * 900_000
    body = {"model": "fake", "messages": [{"role": role, "content": "hi"}]}
    status, answer = ask("/v1/chat/completions", json.dumps(body).encode())
    message = assert_openai_error_shape(answer)["message"]
    assert status == 400 and len(message) < 2100, len(message)
    assert message.startswith("messages[0].role is 'xxx") and "characters cut" in message
    assert "it must be one of" in message


# -- JSON inside strings -------------------------------------------------------------------------


def test_tool_call_arguments_nested_past_the_depth_check_are_a_400() -> None:
    call = {"id": "c1", "function": {"name": "f", "arguments": "[" * 5000 + "]" * 5000}}
    messages = [*HI, {"role": "assistant", "tool_calls": [call]}]
    body = json.dumps({"model": "fake", "messages": messages}).encode()
    status, answer = ask("/v1/chat/completions", body)
    assert status == 400, answer
    error = assert_openai_error_shape(answer)
    assert error["param"] == "messages"
    assert error["message"] == (
        f"messages[1].tool_calls[0].function.arguments nests JSON deeper than {MAX_DEPTH} levels"
    )


def test_function_call_arguments_nested_past_the_depth_check_are_a_400_on_responses() -> None:
    item = {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "[" * 5000}
    body = json.dumps({"model": "fake", "input": [item]}).encode()
    status, answer = ask("/v1/responses", body)
    assert status == 400, answer
    assert "arguments nests JSON deeper" in assert_openai_error_shape(answer)["message"]


def test_the_app_answers_a_plain_request_in_this_process() -> None:
    """The harness itself: what is not refused reaches the app's handlers."""
    status, body = ask("/api/version")
    assert status == 200 and "version" in body, body
