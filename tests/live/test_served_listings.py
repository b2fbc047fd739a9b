"""Every served model is on every list (#44): a model named by `serve --model FILE` is in
/api/tags, /v1/models (OpenAI's and Anthropic's listing) and /api/show, and pulling it, or a model
already in the store, answers Ollama's success stream without a download. Codex's `--oss` looks
its model up in /api/tags, and pulls it when it is not there."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import anthropic
import ollama
import openai
import pytest

from tests.support.live import CLIENT_TIMEOUT_S, running_daemon
from tests.support.residency_support import gemma_file


@pytest.fixture(scope="module")
def url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A daemon serving Gemma 3 from a file of its own name, as a user's ./gemma3.gguf."""
    linked = tmp_path_factory.mktemp("files") / "gemma3.gguf"
    os.symlink(gemma_file(), linked)
    with running_daemon(["--model", "smollm2", "--model", str(linked), "--ctx", "512"]) as (_, u):
        yield u


def olla(url: str) -> ollama.Client:
    return ollama.Client(host=url, timeout=CLIENT_TIMEOUT_S)


def test_a_model_served_from_a_file_is_in_api_tags(url: str) -> None:
    listed = {m.model: m for m in olla(url).list().models}
    assert "gemma3:latest" in listed
    assert listed["gemma3:latest"].details.family == "gemma3"
    assert listed["gemma3:latest"].size == Path(gemma_file()).stat().st_size
    assert listed["gemma3:latest"].digest


def test_api_ps_gives_a_served_file_the_digest_api_tags_gives_it(url: str) -> None:
    tags = {m.model: m.digest for m in olla(url).list().models}
    ps = {m.model: m.digest for m in olla(url).ps().models}
    assert ps["gemma3:latest"] == tags["gemma3:latest"]


def test_a_model_served_from_a_file_is_in_the_openai_and_anthropic_listings(url: str) -> None:
    oa = openai.OpenAI(base_url=f"{url}/v1", api_key="none", max_retries=0)
    assert "gemma3" in {m.id for m in oa.models.list()}
    an = anthropic.Anthropic(base_url=url, api_key="none", max_retries=0)
    assert "gemma3" in {m.id for m in an.models.list()}


def test_show_describes_a_model_served_from_a_file(url: str) -> None:
    shown = olla(url).show("gemma3")
    assert shown.details.family == "gemma3" and "num_ctx 512" in (shown.parameters or "")


def test_pulling_a_model_served_from_a_file_succeeds_without_a_download(url: str) -> None:
    updates = list(olla(url).pull("gemma3", stream=True))
    assert updates[0].status == "pulling manifest" and updates[-1].status == "success"
    sizes = [u for u in updates if u.total]
    assert sizes and sizes[-1].completed == sizes[-1].total == Path(gemma_file()).stat().st_size


def test_pulling_the_embedded_model_succeeds_without_a_download(url: str) -> None:
    assert olla(url).pull("smollm2", stream=False).status == "success"


def test_a_model_neither_served_nor_known_is_still_a_404(url: str) -> None:
    with pytest.raises(ollama.ResponseError) as err:
        olla(url).pull("no-such-model")
    assert err.value.status_code == 404
