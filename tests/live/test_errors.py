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


# -- prompts that do not fit -------------------------------------------------------------------


def test_oversize_chat_prompt_is_a_400_stating_both_token_counts(client) -> None:
    with pytest.raises(openai.BadRequestError) as info:
        chat(client, messages=[{"role": "user", "content": "hello " * 1500}])
    err = info.value
    assert err.status_code == 400
    assert err.code == "context_length_exceeded"
    numbers = [int(n) for n in re.findall(r"\d+", err.message)]
    assert CTX in numbers, err.message
    assert any(n > CTX for n in numbers), err.message  # the prompt's own count


def test_oversize_token_prompt_states_its_exact_length_and_the_context(client) -> None:
    with pytest.raises(openai.BadRequestError) as info:
        client.completions.create(model=MODEL, prompt=[100] * 1500, max_tokens=2)
    err = info.value
    assert err.code == "context_length_exceeded"
    assert re.search(r"\b1500\b", err.message), err.message
    assert re.search(rf"\b{CTX}\b", err.message), err.message


def test_prompt_that_fills_the_whole_context_is_refused(client) -> None:
    with pytest.raises(openai.BadRequestError) as info:
        client.completions.create(model=MODEL, prompt=[100] * CTX, max_tokens=1)
    assert info.value.code == "context_length_exceeded"


def test_oversize_completion_prompt_names_prompt_as_the_param(client) -> None:
    with pytest.raises(openai.BadRequestError) as info:
        client.completions.create(model=MODEL, prompt=[100] * 1500, max_tokens=2)
    assert info.value.param == "prompt"


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
    err = info.value
    assert err.status_code == 404
    assert err.code == "model_not_found"
    assert "no-such-model" in err.message


def test_unknown_model_on_completions_is_a_404_too(client) -> None:
    with pytest.raises(openai.NotFoundError) as info:
        client.completions.create(model="no-such-model", prompt="hi", max_tokens=2)
    assert info.value.code == "model_not_found"


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
    err = info.value
    assert err.status_code == 400
    assert err.param == param, err.body
    assert err.type == "invalid_request_error"


@pytest.mark.parametrize(
    ("param", "value"), [("temperature", 3.5), ("max_tokens", 0), ("top_p", 1.5), ("n", 2)]
)
def test_parameter_out_of_range_is_a_400_naming_it(client, param: str, value) -> None:
    with pytest.raises(openai.BadRequestError) as info:
        chat(client, extra_body={param: value})
    assert info.value.param == param, info.value.body


def test_empty_message_list_is_a_400_naming_messages(client) -> None:
    with pytest.raises(openai.BadRequestError) as info:
        chat(client, messages=[])
    assert info.value.param == "messages"


def test_unknown_route_is_a_404_with_the_openai_error_shape(daemon_url) -> None:
    status, _, payload = raw_request(f"{daemon_url}/v1/no-such-endpoint", "POST", b"{}")
    assert status == 404
    assert_openai_error_shape(payload)


# -- token ids the model does not have ------------------------------------------------------------


def test_token_id_outside_the_vocabulary_is_a_400_naming_prompt(client) -> None:
    with pytest.raises(openai.BadRequestError) as info:
        client.completions.create(model=MODEL, prompt=[10**6, 5], max_tokens=2)
    assert info.value.param == "prompt"


def test_token_id_outside_the_vocabulary_does_not_fail_other_requests(client) -> None:
    victim = client.completions.create(
        model=MODEL, prompt=copy_prompt("violin"), temperature=0, max_tokens=200, stream=True
    )
    try:
        chunks = iter(victim)
        next(chunks)  # the victim is running: it holds a slot and decodes every step
        try:
            client.completions.create(model=MODEL, prompt=[10**6, 5], max_tokens=2)
        except openai.APIStatusError:
            pass
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
        assert info.value.status_code == 503
        assert info.value.code == "queue_full"
    finally:
        running.close()
        if waiting is not None:
            waiting.close()
        small.close()


# -- and through it all ----------------------------------------------------------------------------


def test_daemon_still_serves_normally_after_every_kind_of_refusal(client, daemon_url) -> None:
    raw_request(f"{daemon_url}/v1/chat/completions", "POST", b"{broken")
    refusals = [
        lambda: chat(client, messages=[{"role": "user", "content": "hello " * 1500}]),
        lambda: chat(client, model="no-such-model"),
        lambda: chat(client, temperature="hot"),
        lambda: chat(client, max_tokens="ten"),
        lambda: chat(client, extra_body={"messages": "not a list"}),
    ]
    for refuse in refusals:
        with pytest.raises(openai.APIStatusError) as info:
            refuse()
        assert info.value.status_code in (400, 404)

    r = chat(client, temperature=0, max_tokens=4)
    assert r.choices[0].message.content
    assert r.usage.completion_tokens > 0
