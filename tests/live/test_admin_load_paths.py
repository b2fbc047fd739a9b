"""Loading a model by file path is the operator's alone: POST /api/admin/load naming a file
takes this user's CLI (its operator token) or the admin key, since any other caller could load,
and so probe, any file on the disk, past the import roots. Anyone else gets a 403 that says the
same whatever is at the path. The request faces take no path from anyone."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.daemons import operator_headers, post_json, raw_request
from tests.support.live import CLIENT_TIMEOUT_S, running_daemon
from tests.support.store_support import smol_bytes

ARGS = ["--no-default-model", "--parallel", "1", "--ctx", "256"]
SERVED = "smollm2-135m-instruct.q4_1"  # the embedded file's stem, as a path is served


@pytest.fixture(scope="module")
def keyed() -> Iterator[str]:
    """A daemon with an API key and no admin key: a caller with the key passes the guard."""
    with running_daemon([*ARGS, "--api-key", "k-user"]) as (_, url):
        yield url


@pytest.fixture(scope="module")
def admin() -> Iterator[str]:
    with running_daemon([*ARGS, "--admin-key", "k-admin"]) as (_, url):
        yield url


@pytest.fixture
def paths(tmp_path: Path) -> dict[str, str]:
    """A good GGUF, a broken one, a folder and nothing at all."""
    broken = tmp_path / "broken.gguf"
    broken.write_bytes(b"GGUF" + b"\0" * 64)
    return {
        "good": str(smol_bytes()),
        "broken": str(broken),
        "folder": str(tmp_path),
        "missing": str(tmp_path / "no-such.gguf"),
    }


USER = {"Authorization": "Bearer k-user"}


def load(url: str, model: str, headers: dict[str, str] | None = None) -> tuple[int, Any]:
    return post_json(f"{url}/api/admin/load", {"model": model}, CLIENT_TIMEOUT_S, headers)


def loaded(url: str) -> set[str]:
    status, _, body = raw_request(f"{url}/api/ps", headers=USER)
    assert status == 200, body
    return {m["name"].partition(":")[0] for m in body["models"]}


def test_a_caller_without_the_operator_token_gets_one_403_whatever_the_path_holds(
    keyed: str, paths: dict[str, str]
) -> None:
    answers = {kind: load(keyed, path, USER) for kind, path in paths.items()}
    assert {status for status, _ in answers.values()} == {403}, answers
    assert len({json.dumps(body) for _, body in answers.values()}) == 1, answers
    (body,) = {json.dumps(body) for _, body in answers.values()}
    assert set(json.loads(body)) == {"error"}  # Ollama's shape
    assert "operator" in body and "admin key" in body
    assert loaded(keyed) == set()


def test_a_bare_file_name_is_a_path_too(keyed: str) -> None:
    # `x.gguf` would be read from the daemon's own folder.
    status, body = load(keyed, "SmolLM2-135M-Instruct.Q4_1.gguf", USER)
    assert status == 403, body


def test_the_operator_loads_a_file_by_its_path(keyed: str) -> None:
    status, body = load(keyed, str(smol_bytes()), operator_headers(keyed))
    assert status == 200, body
    assert body["model"] == f"{SERVED}:latest"
    assert SERVED in loaded(keyed)


def test_the_admin_key_loads_a_file_by_its_path(admin: str) -> None:
    status, body = load(admin, str(smol_bytes()), {"Authorization": "Bearer k-admin"})
    assert status == 200, body
    assert SERVED in loaded(admin)


@pytest.mark.parametrize(
    "path, body",
    [
        ("/api/chat", {"messages": [{"role": "user", "content": "hi"}], "stream": False}),
        ("/api/generate", {"prompt": "hi", "stream": False}),
        ("/api/embed", {"input": "hi"}),
        ("/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}]}),
        ("/v1/completions", {"prompt": "hi"}),
        ("/v1/embeddings", {"input": "hi"}),
        ("/v1/messages", {"max_tokens": 4, "messages": [{"role": "user", "content": "hi"}]}),
        ("/v1/responses", {"input": "hi"}),
    ],
)
def test_no_request_face_loads_a_model_named_by_its_path(
    admin: str, path: str, body: dict[str, Any]
) -> None:
    before = loaded(admin)
    status, answer = post_json(
        f"{admin}{path}", {**body, "model": str(smol_bytes())}, CLIENT_TIMEOUT_S
    )
    assert status == 400 and "not a model name" in json.dumps(answer), answer
    assert loaded(admin) == before
