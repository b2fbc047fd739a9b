"""Fill-in-the-middle through live daemons and real clients: Ollama's /api/generate `suffix`,
OpenAI's /v1/completions `suffix`, and what /api/show says about it; llama.cpp's /infill is
test_fim_infill.py's.

No FIM-trained GGUF ships on PyPI, so the model with FIM tokens is a copy of SmolLM2 whose
metadata names three of its special tokens as prefix, suffix and middle (and one as the file
separator; fim_support.py); llama.cpp itself already finds `<reponame>` in it as the repo token.
What the daemon sends to the kernels is compared with the sequence computed here with
llama.cpp's own vocabulary: Ollama's `context` is the prompt's tokens followed by the answer's.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import llama_cpp as ll
import ollama
import openai
import pytest

from localserve.formats.gguf_fim import fim_texts
from localserve.formats.gguf_header import find_strings, read_header, string_at
from tests.support.fim_support import (  # noqa: F401  (fixtures)
    FIM_MODEL,
    MID,
    PLAIN_MODEL,
    PRE,
    PREFIX,
    SEP,
    SUF,
    SUFFIX,
    Vocab,
    fim_copy,
    fim_url,
    vocab,
)
from tests.support.gguf_copy import model_file
from tests.support.live import CLIENT_TIMEOUT_S

GREEDY = {"temperature": 0, "repeat_penalty": 1.0}


@pytest.fixture(scope="module")
def fim_ollama(fim_url: str) -> ollama.Client:
    return ollama.Client(host=fim_url, timeout=CLIENT_TIMEOUT_S)


@pytest.fixture(scope="module")
def fim_openai(fim_url: str) -> Iterator[openai.OpenAI]:
    c = openai.OpenAI(
        base_url=f"{fim_url}/v1", api_key="none", timeout=CLIENT_TIMEOUT_S, max_retries=0
    )
    yield c
    c.close()


@pytest.fixture(scope="module")
def plain_ollama(daemon_url: str) -> ollama.Client:
    return ollama.Client(host=daemon_url, timeout=CLIENT_TIMEOUT_S)


def fim_tokens_of_smollm2() -> tuple[int, int, int]:
    v = Vocab(model_file())
    try:
        return v.fim
    finally:
        ll.llama_model_free(v.model)


# -- the model's FIM tokens ---------------------------------------------------------------------


def test_llama_cpp_finds_the_copys_fim_tokens_and_none_in_smollm2(vocab: Vocab) -> None:
    assert vocab.fim == (PRE, SUF, MID) and vocab.sep == SEP and vocab.rep == 4
    assert fim_tokens_of_smollm2() == (-1, -1, -1)


def test_the_header_reader_finds_token_texts_without_a_load(fim_copy: Path) -> None:
    """What `show` relies on: a vocabulary searched by text (llama.cpp's way of finding a
    family's FIM tokens) and read by id (the GGUF keys' way)."""
    header = read_header(str(model_file()))
    tokens = "tokenizer.ggml.tokens"
    assert find_strings(header, tokens, ("<reponame>", "<|fim_prefix|>", "<reponame")) == {
        "<reponame>"
    }
    assert string_at(header, tokens, PRE) == "<jupyter_start>"
    assert fim_texts(header) is None
    assert fim_texts(read_header(str(fim_copy))) == (
        "<jupyter_start>",
        "<jupyter_text>",
        "<jupyter_code>",
    )


def test_show_lists_insert_for_a_model_with_fim_tokens(fim_ollama: ollama.Client) -> None:
    capabilities = fim_ollama.show(FIM_MODEL).capabilities
    assert capabilities[:2] == ["completion", "insert"] and "embedding" in capabilities


def test_show_does_not_list_insert_for_smollm2(plain_ollama: ollama.Client) -> None:
    assert "insert" not in plain_ollama.show(PLAIN_MODEL).capabilities


def test_show_template_mentions_suffix_only_for_a_model_with_fim_tokens(
    fim_ollama: ollama.Client, plain_ollama: ollama.Client
) -> None:
    template = fim_ollama.show(FIM_MODEL).template
    assert "im_start" in template, "the chat template is still there"
    assert "{{ .Suffix }}" in template
    assert "<jupyter_start>{{ .Prompt }}<jupyter_text>{{ .Suffix }}<jupyter_code>" in template
    assert ".Suffix" not in plain_ollama.show(PLAIN_MODEL).template


# -- what reaches the kernels ---------------------------------------------------------------------


def test_generate_with_a_suffix_sends_exactly_pre_prefix_suf_suffix_mid(
    fim_ollama: ollama.Client, vocab: Vocab
) -> None:
    r = fim_ollama.generate(
        model=FIM_MODEL, prompt=PREFIX, suffix=SUFFIX, options={**GREEDY, "num_predict": 8}
    )
    expected = vocab.fim_prompt(PREFIX, SUFFIX)
    assert r.prompt_eval_count == len(expected)
    assert r.context[: len(expected)] == expected
    assert len(r.context) == len(expected) + r.eval_count


def test_completions_with_a_suffix_fill_as_generate_does(
    fim_openai: openai.OpenAI, fim_ollama: ollama.Client, vocab: Vocab
) -> None:
    c = fim_openai.completions.create(
        model=FIM_MODEL, prompt=PREFIX, suffix=SUFFIX, temperature=0, max_tokens=8
    )
    assert c.usage.prompt_tokens == len(vocab.fim_prompt(PREFIX, SUFFIX))
    g = fim_ollama.generate(
        model=FIM_MODEL, prompt=PREFIX, suffix=SUFFIX, options={**GREEDY, "num_predict": 8}
    )
    assert c.choices[0].text == g.response


def test_a_suffix_streams_on_both_faces(
    fim_openai: openai.OpenAI, fim_ollama: ollama.Client
) -> None:
    text = "".join(
        ch.choices[0].text
        for ch in fim_openai.completions.create(
            model=FIM_MODEL, prompt=PREFIX, suffix=SUFFIX, temperature=0, max_tokens=6, stream=True
        )
    )
    parts = fim_ollama.generate(
        model=FIM_MODEL,
        prompt=PREFIX,
        suffix=SUFFIX,
        stream=True,
        options={**GREEDY, "num_predict": 6},
    )
    assert "".join(p.response for p in parts) == text


def test_raw_generate_sends_the_prompt_untemplated(fim_ollama: ollama.Client, vocab: Vocab) -> None:
    raw = fim_ollama.generate(model=FIM_MODEL, prompt=PREFIX, raw=True, options={"num_predict": 1})
    assert raw.prompt_eval_count == len(vocab.tokens(PREFIX, add_special=True))
    assert not raw.context
    templated = fim_ollama.generate(model=FIM_MODEL, prompt=PREFIX, options={"num_predict": 1})
    assert templated.prompt_eval_count > raw.prompt_eval_count


def test_raw_generate_with_a_suffix_still_fills_in_the_middle(
    fim_ollama: ollama.Client, vocab: Vocab
) -> None:
    opts = {**GREEDY, "num_predict": 8}
    raw = fim_ollama.generate(model=FIM_MODEL, prompt=PREFIX, suffix=SUFFIX, raw=True, options=opts)
    assert raw.prompt_eval_count == len(vocab.fim_prompt(PREFIX, SUFFIX)) and not raw.context
    plain = fim_ollama.generate(model=FIM_MODEL, prompt=PREFIX, suffix=SUFFIX, options=opts)
    assert raw.response == plain.response


def test_a_suffix_with_a_template_of_the_requests_own_is_refused(fim_ollama: ollama.Client) -> None:
    with pytest.raises(ollama.ResponseError) as info:
        fim_ollama.generate(model=FIM_MODEL, prompt=PREFIX, suffix=SUFFIX, template="{{ .Prompt }}")
    assert info.value.status_code == 400 and "template" in info.value.error


# -- a model without FIM tokens --------------------------------------------------------------------


def test_a_suffix_for_a_model_without_fim_tokens_is_a_400_naming_suffix_on_ollama(
    plain_ollama: ollama.Client,
) -> None:
    with pytest.raises(ollama.ResponseError) as info:
        plain_ollama.generate(model=PLAIN_MODEL, prompt=PREFIX, suffix=SUFFIX)
    assert info.value.status_code == 400 and "'suffix'" in info.value.error


def test_a_suffix_for_a_model_without_fim_tokens_is_a_400_naming_suffix_on_openai(client) -> None:
    with pytest.raises(openai.BadRequestError) as info:
        client.completions.create(model=PLAIN_MODEL, prompt=PREFIX, suffix=SUFFIX, max_tokens=4)
    assert info.value.body["param"] == "suffix"
    assert "fill in the middle" in info.value.body["message"]


def test_an_empty_suffix_is_a_plain_completion(client, plain_ollama: ollama.Client) -> None:
    assert client.completions.create(model=PLAIN_MODEL, prompt=PREFIX, suffix="", max_tokens=2)
    assert plain_ollama.generate(
        model=PLAIN_MODEL, prompt=PREFIX, suffix="", options={"num_predict": 2}
    ).done


def test_a_suffix_on_chat_completions_is_refused(client) -> None:
    with pytest.raises(openai.BadRequestError) as info:
        client.chat.completions.create(
            model=PLAIN_MODEL,
            messages=[{"role": "user", "content": "Hi"}],
            max_tokens=2,
            extra_body={"suffix": "x"},
        )
    assert info.value.body["param"] == "suffix"
