"""Contexts sized to the model and the memory (#44), on a daemon given nothing but its models:
each gets its trained context where half the memory budget holds it with every slot, else as
much as it does; /api/show, /api/ps and /v1/models all report the context loaded."""

from __future__ import annotations

import os
from collections.abc import Iterator

import ollama
import openai
import pytest

from tests.support.live import CLIENT_TIMEOUT_S, running_daemon
from tests.support.residency_support import gemma_file


@pytest.fixture(scope="module")
def url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    linked = tmp_path_factory.mktemp("files") / "gemma3.gguf"
    os.symlink(gemma_file(), linked)
    # 16 slots in 6 GiB: half of it holds Gemma 3's 32768 tokens a slot (its sliding-window
    # layers keep their windows only), not SmolLM2's 8192 (every layer keeps every token).
    args = ["--model", "smollm2", "--model", str(linked), "--memory-budget", "6GiB"]
    args += ["--parallel", "16"]
    with running_daemon(args) as (_, u):
        yield u


def contexts(url: str) -> dict[str, tuple[int, int, int]]:
    """Each model's context by /api/ps, /api/show and /v1/models."""
    olla = ollama.Client(host=url, timeout=CLIENT_TIMEOUT_S)
    oa = openai.OpenAI(base_url=f"{url}/v1", api_key="none", max_retries=0)
    listed = {m.id: m.model_extra["context_length"] for m in oa.models.list()}
    out = {}
    for model in olla.ps().models:
        name = model.model.removesuffix(":latest")
        shown = olla.show(name).modelinfo
        arch = shown["general.architecture"]
        out[name] = (model.context_length, shown[f"{arch}.context_length"], listed[name])
    return out


def test_a_model_whose_trained_context_fits_gets_all_of_it(url: str) -> None:
    assert contexts(url)["gemma3"] == (32768, 32768, 32768)


def test_a_model_whose_trained_context_does_not_fit_gets_as_much_as_fits(url: str) -> None:
    ps, shown, listed = contexts(url)["smollm2"]
    assert 4096 <= ps < 8192 and ps == shown == listed


def test_a_prompt_within_the_fitted_context_is_answered(url: str) -> None:
    oa = openai.OpenAI(
        base_url=f"{url}/v1", api_key="none", timeout=CLIENT_TIMEOUT_S, max_retries=0
    )
    long = "The quick brown fox jumps over the lazy dog. " * 600  # ~6,000 tokens, over 4096
    answer = oa.chat.completions.create(
        model="smollm2", messages=[{"role": "user", "content": long}], max_tokens=2
    )
    assert answer.usage.prompt_tokens > 4096
