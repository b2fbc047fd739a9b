"""The request fields every face reads alike: keep_alive (one reader, an explicit UNSET when a
body sent none) and the model's name (Ollama's older `name` where Ollama's server takes it)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from localserve.ground.errors import BadRequest
from localserve.ground.units import UNSET
from localserve.server.http.readers import keep_alive, model_name
from tests.support.helpers import MODEL, raw_request


def post(url: str, body: dict[str, Any]) -> tuple[int, Any]:
    status, _, data = raw_request(url, "POST", json.dumps(body).encode())
    return status, data


# -- keep_alive ---------------------------------------------------------------------------------


def test_keep_alive_is_unset_when_the_body_sends_none() -> None:
    assert keep_alive({}) is UNSET


def test_keep_alive_null_is_unset_as_in_ollama() -> None:
    assert keep_alive({"keep_alive": None}) is UNSET


def test_keep_alive_zero_is_zero_seconds_not_unset() -> None:
    assert keep_alive({"keep_alive": 0}) == 0.0


def test_keep_alive_takes_ollamas_durations() -> None:
    assert keep_alive({"keep_alive": "5m"}) == 300.0


def test_keep_alive_negative_means_for_ever() -> None:
    assert keep_alive({"keep_alive": -1}) is None


@pytest.mark.parametrize("value", ["soon", True, [5]], ids=["word", "bool", "list"])
def test_keep_alive_that_is_not_a_duration_is_a_bad_request_naming_it(value: Any) -> None:
    with pytest.raises(BadRequest) as info:
        keep_alive({"keep_alive": value})
    assert info.value.param == "keep_alive"


# -- the model's name ---------------------------------------------------------------------------


def test_model_name_wins_over_the_older_name_field() -> None:
    assert model_name({"model": "a", "name": "b"}) == "a"


def test_model_name_falls_back_to_the_older_name_field() -> None:
    assert model_name({"name": "b"}) == "b"


def test_model_name_ignores_name_where_ollama_does() -> None:
    with pytest.raises(BadRequest) as info:
        model_name({"name": "b"}, accept_name=False)
    assert info.value.param == "model"


@pytest.mark.parametrize("body", [{}, {"model": ""}, {"model": None, "name": ""}])
def test_a_body_naming_no_model_is_a_bad_request_naming_model(body: dict[str, Any]) -> None:
    with pytest.raises(BadRequest, match="'model' is required") as info:
        model_name(body)
    assert info.value.param == "model"


def test_a_model_that_is_not_a_string_is_a_bad_request() -> None:
    with pytest.raises(BadRequest, match="must be a string"):
        model_name({"model": 7})


# -- over HTTP ----------------------------------------------------------------------------------


def test_admin_load_accepts_ollamas_name_field(daemon_url: str) -> None:
    # keep_alive -1: the shared daemon's model stays for ever, as `serve --model` left it.
    status, body = post(f"{daemon_url}/api/admin/load", {"name": MODEL, "keep_alive": -1})
    assert status == 200, body
    assert body["model"] == f"{MODEL}:latest"


def test_admin_load_prefers_model_when_both_fields_are_sent(daemon_url: str) -> None:
    status, body = post(
        f"{daemon_url}/api/admin/load", {"model": MODEL, "name": "no-such-model", "keep_alive": -1}
    )
    assert status == 200, body
    assert body["model"] == f"{MODEL}:latest"


def test_admin_load_without_model_or_name_is_a_400_naming_model(daemon_url: str) -> None:
    status, body = post(f"{daemon_url}/api/admin/load", {"keep_alive": -1})
    assert status == 400, body
    assert body == {"error": "'model' is required"}


def test_admin_pin_accepts_ollamas_name_field(daemon_url: str) -> None:
    status, body = post(f"{daemon_url}/api/admin/pin", {"name": MODEL, "pinned": False})
    assert status == 200, body
    assert body == {"model": MODEL, "pinned": False}


def test_admin_unload_accepts_ollamas_name_field(daemon_factory) -> None:
    _, url = daemon_factory(["--parallel", "2", "--ctx", "256"])
    status, body = post(f"{url}/api/admin/unload", {"name": MODEL})
    assert status == 200, body
    assert body == {"model": MODEL, "unloading": True}


def test_show_accepts_ollamas_older_name_field(daemon_url: str) -> None:
    status, body = post(f"{daemon_url}/api/show", {"name": MODEL})
    assert status == 200, body
    assert body["details"]["family"] == "llama"


def test_generate_with_only_the_older_name_field_is_a_400_as_in_ollama(daemon_url: str) -> None:
    status, body = post(f"{daemon_url}/api/generate", {"name": MODEL, "prompt": "Hi"})
    assert status == 400, body
    assert body == {"error": "'model' is required"}


def test_openai_keep_alive_null_is_taken_as_not_sent(client) -> None:
    response = client.chat.completions.create(
        model=MODEL,
        messages=[{"role": "user", "content": "Hi"}],
        max_tokens=1,
        extra_body={"keep_alive": None},
    )
    assert response.usage.completion_tokens == 1
