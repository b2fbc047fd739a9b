"""Test copies of SmolLM2 carrying the chat templates that real models ship, one daemon serving
them all, and Hugging Face's own rendering of those templates to compare the daemon's prompts
with.

The templates in templates/ are the models' own `chat_template`s from their tokenizer_config.json,
byte for byte as llama.cpp keeps them for its tests (models/templates in its repository):

- meta-llama-Llama-3.1-8B-Instruct.jinja, meta-llama-Llama-3.2-3B-Instruct.jinja: custom tools
  in the first user turn, calls written as `{"name": ..., "parameters": {...}}`;
- mistralai-Mistral-Nemo-Instruct-2407.jinja: `[AVAILABLE_TOOLS]`, calls written as
  `[TOOL_CALLS][{"name": ..., "arguments": {...}}]`;
- Qwen-QwQ-32B.jinja: a reasoning model's, which opens `<think>` in the generation prompt (as
  DeepSeek-R1's and the Qwen3 thinking models' do), and Hermes-style `<tool_call>`s;
- Qwen-Qwen3-0.6B.jinja: Qwen3's, which writes an empty `<think></think>` block into the
  generation prompt when `enable_thinking` is false.

No small model tuned on these formats ships on PyPI; the weights are SmolLM2-135M's, byte for
byte (gguf_copy.py). What that honestly allows: the prompt each template renders is checked
token for token against Hugging Face's rendering (`assert_prompted_with`); a call's format is
forced by the tools' grammar, not written by a model that knows it; and a `</think>` is the
model's own only where greedy SmolLM2 copies one from the prompt.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import gguf
import ollama
import openai
import pytest
from openai.types import Completion, CompletionUsage

from tests.support.daemons import stop_daemon
from tests.support.gguf_copy import copy_with, model_file
from tests.support.live import CLIENT_TIMEOUT_S, start_daemon

TEMPLATES = {
    "llama3.1": "meta-llama-Llama-3.1-8B-Instruct.jinja",
    "llama3.2": "meta-llama-Llama-3.2-3B-Instruct.jinja",
    "mistral-nemo": "mistralai-Mistral-Nemo-Instruct-2407.jinja",
    "qwq": "Qwen-QwQ-32B.jinja",
    "qwen3": "Qwen-Qwen3-0.6B.jinja",
}
_FOLDER = Path(__file__).parent / "templates"


def template_text(name: str) -> str:
    return (_FOLDER / TEMPLATES[name]).read_text(encoding="utf-8")


def served_name(name: str) -> str:
    """The model name the daemon serves the copy with `name`'s template under."""
    return f"smollm2-{name}"


def _special_texts() -> dict[str, str]:
    """SmolLM2's BOS and EOS as text: what the daemon gives a template as bos_token, eos_token."""
    reader = gguf.GGUFReader(model_file(), "r")
    tokens = reader.get_field(gguf.Keys.Tokenizer.LIST).contents()
    bos = reader.get_field(gguf.Keys.Tokenizer.BOS_ID).contents()
    eos = reader.get_field(gguf.Keys.Tokenizer.EOS_ID).contents()
    return {"bos_token": tokens[bos], "eos_token": tokens[eos]}


def hf_render(name: str, messages: list[dict[str, Any]], **variables: Any) -> str:
    """The prompt Hugging Face's apply_chat_template writes with `name`'s template (transformers'
    own renderer, not ours), the generation prompt included; `variables` as `tools=[...]`."""
    from transformers.utils.chat_template_utils import render_jinja_template

    rendered, _ = render_jinja_template(
        [messages],
        chat_template=template_text(name),
        add_generation_prompt=True,
        **_special_texts(),
        **variables,
    )
    return rendered[0]


@pytest.fixture(scope="session")
def templates_daemon(tmp_path_factory) -> Iterator[tuple[subprocess.Popen, str]]:
    """One daemon serving a copy of SmolLM2 per template, each with one slot and no prompt
    cache: a request's cached tokens can only be those its model's last request left in the
    slot (`assert_prompted_with` relies on it)."""
    templates = {served_name(name): template_text(name) for name in TEMPLATES}
    args = ["--parallel", "1", "--ctx", "2048", "--prompt-cache", "0"]
    with serving_copies(tmp_path_factory.mktemp("templates"), templates, args) as daemon:
        yield daemon


@contextmanager
def serving_copies(
    folder: Path, templates: dict[str, str], args: list[str]
) -> Iterator[tuple[subprocess.Popen, str]]:
    """A daemon started with `args`, serving a copy of SmolLM2 per template, each under its
    key's name."""
    for name, source in templates.items():
        copy = copy_with(folder / f"{name}.gguf", {"tokenizer.chat_template": source})
        args = [*args, "--model", str(copy)]
    proc, url = start_daemon(args, timeout_s=180)
    try:
        yield proc, url
    finally:
        stop_daemon(proc)


@pytest.fixture(scope="session")
def templates_client(templates_daemon) -> Iterator[openai.OpenAI]:
    c = openai.OpenAI(
        base_url=f"{templates_daemon[1]}/v1",
        api_key="none",
        timeout=CLIENT_TIMEOUT_S,
        max_retries=0,
    )
    yield c
    c.close()


@pytest.fixture(scope="session")
def templates_ollama(templates_daemon) -> Iterator[ollama.Client]:
    c = ollama.Client(host=templates_daemon[1], timeout=CLIENT_TIMEOUT_S)
    yield c
    c._client.close()


def raw_completion(
    client: openai.OpenAI, name: str, prompt: str, max_tokens: int = 1
) -> Completion:
    """What the model writes, greedily, after `prompt` given as plain text: no template, no
    parser. It leaves `prompt`'s tokens in the model's one slot, for `assert_prompted_with`."""
    return client.completions.create(
        model=served_name(name), prompt=prompt, max_tokens=max_tokens, temperature=0
    )


def assert_prompted_with(usage: CompletionUsage, primed: Completion) -> None:
    """The chat request whose `usage` this is, sent right after `primed` (a raw_completion of the
    expected prompt, to the same model), was prompted with exactly primed's tokens: as many, and
    all but the last (evaluated again, for its logits) found in the slot primed left them in."""
    n = primed.usage.prompt_tokens
    cached = usage.prompt_tokens_details.cached_tokens
    assert (usage.prompt_tokens, cached) == (n, n - 1), "the daemon rendered another prompt"
