"""The FIM tests' model: a copy of SmolLM2 whose metadata names three of its special tokens as
prefix, suffix and middle (and one as the file separator), a daemon serving it by path, and the
copy's vocabulary as llama.cpp loads it, to compute the tokens the daemon should send.

No FIM-trained GGUF ships on PyPI. Import the fixtures into a test module
(`from tests.support.fim_support import fim_copy, fim_url, vocab`); the fixtures are the
module's, so each test module that imports them has a daemon of its own.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import llama_cpp as ll
import pytest

from tests.support.daemons import discard
from tests.support.gguf_copy import copy_with
from tests.support.live import start_daemon

FIM_MODEL = "smolfim"
PLAIN_MODEL = "smollm2"
# Special tokens of SmolLM2 (<jupyter_start>, <jupyter_text>, <jupyter_code>, <file_sep>).
PRE, SUF, MID, SEP = 11, 12, 13, 5
PREFIX = "def add(a, b):\n    "
SUFFIX = "\n\nprint(add(1, 2))\n"


@pytest.fixture(scope="module")
def fim_copy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return copy_with(
        tmp_path_factory.mktemp("fim") / f"{FIM_MODEL}.gguf",
        {
            "tokenizer.ggml.fim_pre_token_id": PRE,
            "tokenizer.ggml.fim_suf_token_id": SUF,
            "tokenizer.ggml.fim_mid_token_id": MID,
            "tokenizer.ggml.fim_sep_token_id": SEP,
        },
    )


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
