"""Refused requests get OpenAI-shaped errors with the right status, code and param."""

from __future__ import annotations

import json
import re

import openai
import pytest

from tests.support.helpers import MODEL, assert_openai_error_shape, copy_prompt, raw_request

CTX = 1024  # the shared daemon's --ctx
HELLO = [{"role": "user", "content": "Hello!"}]


def chat(client, **kwargs):
    kwargs.setdefault("messages", HELLO)
    kwargs.setdefault("max_tokens", 2)
    kwargs.setdefault("model", MODEL)
    return client.chat.completions.create(**kwargs)


def refusal(info: pytest.ExceptionInfo[openai.APIStatusError], status: int, **fields) -> dict:
    """The refusal has exactly `status` and a body in OpenAI's error shape whose `fields`
    (param, code, type) are as given; returns the body's error object."""
    err = info.value
    assert err.status_code == status, err.response.text
    error = assert_openai_error_shape(err.response.json())
    assert {key: error[key] for key in fields} == fields, error
    return error


# -- prompts that do not fit -------------------------------------------------------------------


def test_oversize_chat_prompt_is_a_400_stating_both_token_counts(client) -> None:
    with pytest.raises(openai.BadRequestError) as info:
        chat(client, messages=[{"role": "user", "content": "hello " * 1500}])
    error = refusal(info, 400, code="context_length_exceeded", param="messages")
    numbers = [int(n) for n in re.findall(r"\d+", error["message"])]
    assert CTX in numbers, error
    assert any(n > CTX for n in numbers), error  # the prompt's own count


def test_oversize_token_prompt_states_its_exact_length_and_the_context(client) -> None:
    with pytest.raises(openai.BadRequestError) as info:
        client.completions.create(model=MODEL, prompt=[100] * 1500, max_tokens=2)
    error = refusal(info, 400, code="context_length_exceeded")
    assert re.search(r"\b1500\b", error["message"]), error
    assert re.search(rf"\b{CTX}\b", error["message"]), error


def test_prompt_that_fills_the_whole_context_is_refused(client) -> None:
    with pytest.raises(openai.BadRequestError) as info:
        client.completions.create(model=MODEL, prompt=[100] * CTX, max_tokens=1)
    refusal(info, 400, code="context_length_exceeded", param="prompt")


def test_oversize_completion_prompt_names_prompt_as_the_param(client) -> None:
    with pytest.raises(openai.BadRequestError) as info:
        client.completions.create(model=MODEL, prompt=[100] * 1500, max_tokens=2)
    refusal(info, 400, param="prompt")


# -- bodies that are not requests ---------------------------------------------------------------


@pytest.mark.parametrize(
    "body",
    [b'{"model": "smollm2", "messages": [', b"not json at all", b"", b"\xff\xfe{}"],
    ids=["truncated", "text", "empty", "not-utf8"],
)
def test_malformed_json_is_a_400_with_the_openai_error_shape(daemon_url, body: bytes) -> None:
    status, headers, payload = raw_request(f"{daemon_url}/v1/chat/completions", "POST", body)
    assert status == 400, payload
    assert headers.get("Content-Type", "").startswith("application/json")
    error = assert_openai_error_shape(payload)
    assert error["type"] == "invalid_request_error"


def test_json_that_is_not_an_object_is_a_400(daemon_url) -> None:
    status, _, payload = raw_request(
        f"{daemon_url}/v1/completions", "POST", json.dumps(["smollm2", "hi"]).encode()
    )
    assert status == 400
    assert_openai_error_shape(payload)


# -- wrong names and wrong types -----------------------------------------------------------------


def test_unknown_model_is_a_404_model_not_found(client) -> None:
    with pytest.raises(openai.NotFoundError) as info:
        client.chat.completions.create(model="no-such-model", messages=HELLO, max_tokens=2)
    error = refusal(info, 404, code="model_not_found", param="model")
    assert "no-such-model" in error["message"]


def test_unknown_model_on_completions_is_a_404_too(client) -> None:
    with pytest.raises(openai.NotFoundError) as info:
        client.completions.create(model="no-such-model", prompt="hi", max_tokens=2)
    refusal(info, 404, code="model_not_found", param="model")


WRONG_TYPES = {
    "temperature": "hot",
    "max_tokens": "ten",
    "messages": "not a list",
    "top_p": [0.5],
    "stream": "yes",
    "stop": 7,
    "seed": "lucky",
    "top_k": 2.5,
}


@pytest.mark.parametrize("param", list(WRONG_TYPES))
def test_parameter_of_the_wrong_type_is_a_400_naming_it(client, param: str) -> None:
    with pytest.raises(openai.BadRequestError) as info:
        # extra_body: sent exactly as written, past the client's own typing.
        chat(client, extra_body={param: WRONG_TYPES[param]})
    refusal(info, 400, param=param, type="invalid_request_error")


@pytest.mark.parametrize(
    ("param", "value"), [("temperature", 3.5), ("max_tokens", 0), ("top_p", 1.5), ("n", 2)]
)
def test_parameter_out_of_range_is_a_400_naming_it(client, param: str, value) -> None:
    with pytest.raises(openai.BadRequestError) as info:
        chat(client, extra_body={param: value})
    refusal(info, 400, param=param, type="invalid_request_error")


def test_empty_message_list_is_a_400_naming_messages(client) -> None:
    with pytest.raises(openai.BadRequestError) as info:
        chat(client, messages=[])
    refusal(info, 400, param="messages")


def test_unknown_route_is_a_404_with_the_openai_error_shape(daemon_url) -> None:
    status, _, payload = raw_request(f"{daemon_url}/v1/no-such-endpoint", "POST", b"{}")
    assert status == 404
    assert_openai_error_shape(payload)


# -- token ids the model does not have ------------------------------------------------------------


def test_token_id_outside_the_vocabulary_is_a_400_naming_prompt(client) -> None:
    with pytest.raises(openai.BadRequestError) as info:
        client.completions.create(model=MODEL, prompt=[10**6, 5], max_tokens=2)
    refusal(info, 400, param="prompt")


def test_token_id_outside_the_vocabulary_does_not_fail_other_requests(client) -> None:
    victim = client.completions.create(
        model=MODEL, prompt=copy_prompt("violin"), temperature=0, max_tokens=200, stream=True
    )
    try:
        chunks = iter(victim)
        next(chunks)  # the victim is running: it holds a slot and decodes every step
        with pytest.raises(openai.BadRequestError) as info:
            client.completions.create(model=MODEL, prompt=[10**6, 5], max_tokens=2)
        refusal(info, 400, param="prompt")
        for _ in range(3):  # the victim keeps streaming its own tokens
            chunk = next(chunks)
            assert chunk.choices[0].finish_reason is None
    finally:
        victim.close()


# -- a full queue ---------------------------------------------------------------------------------


def test_full_queue_is_a_503_queue_full(daemon_factory) -> None:
    _, url = daemon_factory(
        ["--model", MODEL, "--parallel", "1", "--max-queue", "1", "--ctx", "256"]
    )
    small = openai.OpenAI(base_url=f"{url}/v1", api_key="none", timeout=60, max_retries=0)

    def endless():  # a copying completion never meets an end-of-generation token
        return small.completions.create(
            model=MODEL, prompt=copy_prompt("violin"), temperature=0, max_tokens=200, stream=True
        )

    running = endless()
    waiting = None
    try:
        next(iter(running))  # a token came back: it holds the only slot
        waiting = endless()  # its headers come back once it is queued
        with pytest.raises(openai.InternalServerError) as info:
            chat(small)
        refusal(info, 503, code="queue_full", type="server_error")
    finally:
        running.close()
        if waiting is not None:
            waiting.close()
        small.close()


# -- and through it all ----------------------------------------------------------------------------


def test_daemon_still_serves_normally_after_every_kind_of_refusal(client, daemon_url) -> None:
    status, _, payload = raw_request(f"{daemon_url}/v1/chat/completions", "POST", b"{broken")
    assert status == 400, payload
    assert_openai_error_shape(payload)
    refusals = [
        (
            lambda: chat(client, messages=[{"role": "user", "content": "hello " * 1500}]),
            400,
            {"code": "context_length_exceeded"},
        ),
        (lambda: chat(client, model="no-such-model"), 404, {"code": "model_not_found"}),
        (lambda: chat(client, temperature="hot"), 400, {"param": "temperature"}),
        (lambda: chat(client, max_tokens="ten"), 400, {"param": "max_tokens"}),
        (lambda: chat(client, extra_body={"messages": "not a list"}), 400, {"param": "messages"}),
    ]
    for refuse, status, fields in refusals:
        with pytest.raises(openai.APIStatusError) as info:
            refuse()
        refusal(info, status, **fields)

    r = chat(client, temperature=0, max_tokens=4)
    assert r.choices[0].message.content
    assert r.usage.completion_tokens > 0
