"""Aliases (#44): `--alias claude-sonnet-4-6=smollm2` lets an agent that knows only its vendor's
model names use a local model under one. The alias answers as the model does, and is listed in
/api/tags, /v1/models (OpenAI's and Anthropic's listing) and /api/show, as a copy made with
`ollama cp` would be; pulling it is Ollama's success stream with no download."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator

import anthropic
import ollama
import openai
import pytest

from tests.support.daemons import free_port, serve_command
from tests.support.live import CLIENT_TIMEOUT_S, running_daemon

ALIAS = "claude-sonnet-4-6"


@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    args = ["--model", "smollm2", "--ctx", "512", "--alias", f"{ALIAS}=smollm2"]
    with running_daemon(args) as (_, u):
        yield u


def olla(url: str) -> ollama.Client:
    return ollama.Client(host=url, timeout=CLIENT_TIMEOUT_S)


def ask(url: str, model: str) -> str:
    client = anthropic.Anthropic(base_url=url, api_key="none", max_retries=0)
    answer = client.messages.create(
        model=model,
        max_tokens=12,
        messages=[{"role": "user", "content": "Name a colour."}],
        extra_body={"temperature": 0},
    )
    return "".join(b.text for b in answer.content if b.type == "text")


def test_a_request_for_an_alias_is_answered_by_its_model(url: str) -> None:
    assert ask(url, ALIAS) == ask(url, "smollm2")


def test_an_alias_is_in_api_tags_with_its_models_digest(url: str) -> None:
    listed = {m.model: m for m in olla(url).list().models}
    assert listed[f"{ALIAS}:latest"].digest == listed["smollm2:latest"].digest


def test_an_alias_is_in_the_openai_and_anthropic_listings_with_its_models_context(
    url: str,
) -> None:
    oa = openai.OpenAI(base_url=f"{url}/v1", api_key="none", max_retries=0)
    listed = {m.id: m for m in oa.models.list()}
    assert listed[ALIAS].model_extra["context_length"] == 512
    an = anthropic.Anthropic(base_url=url, api_key="none", max_retries=0)
    assert ALIAS in {m.id for m in an.models.list()}


def test_show_of_an_alias_describes_its_model(url: str) -> None:
    shown = olla(url).show(ALIAS)
    assert shown.details.family == "llama" and "num_ctx 512" in (shown.parameters or "")


def test_pulling_an_alias_succeeds_without_a_download(url: str) -> None:
    statuses = [p.status for p in olla(url).pull(ALIAS, stream=True)]
    assert statuses[-1] == "success"
    assert not any("downloading" in (s or "") for s in statuses)


def test_an_alias_that_is_no_model_name_stops_the_daemon_with_why() -> None:
    started = subprocess.run(
        serve_command(["--alias", "a@b=smollm2"], free_port()),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert started.returncode != 0
    assert "--alias a@b" in started.stderr and "invalid model name" in started.stderr
