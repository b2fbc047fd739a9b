"""llama.cpp's tokenizer never makes fewer tokens of a text than the floor the backend reads off
the vocabulary at load (backends/llama_model_info.py, ground/token_floor.py): SmolLM2's
vocabulary, loaded alone (no weights, no decode), against texts built of what could undercut
it: runs of whitespace, special tokens written out, the longest tokens, bytes it has no token
for, and any Unicode."""

from __future__ import annotations

from collections.abc import Iterator

import llama_cpp as ll
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from localserve.backends.llama_model_info import _token_floor
from localserve.backends.llama_runtime import ensure_backend
from localserve.ground.token_floor import TokenFloor
from localserve.store.resolve import resolve


class Vocab:
    def __init__(self, path: str) -> None:
        ensure_backend()
        params = ll.llama_model_default_params()
        params.vocab_only = True
        self.model = ll.llama_model_load_from_file(path.encode(), params)
        assert self.model, path
        self.vocab = ll.llama_model_get_vocab(self.model)
        floor = _token_floor(self.model, self.vocab)
        assert floor is not None
        self.floor: TokenFloor = floor
        n = int(ll.llama_vocab_n_tokens(self.vocab))
        texts = [ll.llama_vocab_get_text(self.vocab, t) or b"" for t in range(n)]
        self.longest = max(texts, key=len).decode("utf-8", "replace")

    def count(self, text: str) -> int:
        data = text.encode("utf-8")
        cap = len(data) + 8
        buf = (ll.llama_token * cap)()
        n = ll.llama_tokenize(self.vocab, data, len(data), buf, cap, True, True)
        assert n >= 0
        return int(n)


@pytest.fixture(scope="module")
def smollm2() -> Iterator[Vocab]:
    vocab = Vocab(resolve("smollm2").path)
    yield vocab
    ll.llama_model_free(vocab.model)


def test_smollm2s_floor_is_its_longest_token_less_the_bytes_it_drops(smollm2: Vocab) -> None:
    assert smollm2.floor.longest == len(smollm2.longest.encode()) == 162
    # Bytes with no byte-level token: llama.cpp drops them, so they cannot be counted.
    assert 4 in smollm2.floor.uncounted and ord("x") not in smollm2.floor.uncounted
    assert smollm2.count("\x04" * 100) <= 1  # its BOS, if any: the bytes are gone


LONGEST = "\n" + " " * 80  # what SmolLM2's longest token stands for
PIECES = st.sampled_from(
    [" ", "\n", "\t", "\x04", "\x06", "<|im_start|>", "<|im_end|>", "<|endoftext|>", "x", "é"]
)


@settings(max_examples=150, deadline=None)
@given(
    st.lists(
        st.tuples(PIECES | st.text(max_size=8) | st.just(LONGEST), st.integers(1, 400)),
        max_size=12,
    )
)
def test_no_text_tokenizes_to_fewer_tokens_than_its_floor(
    smollm2: Vocab, runs: list[tuple[str, int]]
) -> None:
    text = "".join(piece * times for piece, times in runs)
    assert smollm2.count(text) >= smollm2.floor.tokens(text)
