"""Whether a grammar of the tool calls (server/chat/call_grammar.py) takes a text, token by
token as llguidance constrains a model: SmolLM2's vocabulary (the model that ships inside a
package), loaded without its weights. A test module that uses `tokenizer` imports it, and
ignores the deprecation warning llguidance's reading of the vocabulary raises once a token:
`pytestmark = pytest.mark.filterwarnings(VOCAB_WARNING)`."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import llguidance
import pytest
from llguidance.llamacpp import lltokenizer_from_vocab

from localserve.ground.sampling import Grammar

# llguidance reads the vocabulary through a llama.cpp name deprecated in 0.3.36.
VOCAB_WARNING = "ignore:llama_token_get_attr:DeprecationWarning"


@pytest.fixture(scope="session")
def tokenizer() -> Iterator[Any]:
    import llama_cpp as ll

    from localserve.store.resolve import resolve

    ll.llama_backend_init()
    params = ll.llama_model_default_params()
    params.vocab_only = True
    model = ll.llama_model_load_from_file(resolve("smollm2").path.encode(), params)
    vocab = ll.llama_model_get_vocab(model)
    yield lltokenizer_from_vocab(vocab, n_vocab=ll.llama_vocab_n_tokens(vocab))
    ll.llama_model_free(model)


def accepts(tokenizer: Any, grammar: Grammar, text: str) -> bool:
    """The grammar takes every token of `text` and may end there."""
    matcher = llguidance.LLMatcher(tokenizer, llguidance.LLMatcher.grammar_from_lark(grammar.text))
    tokens = tokenizer.tokenize_str(text)
    return (
        matcher.validate_tokens(tokens) == len(tokens)
        and not matcher.is_error()
        and matcher.consume_tokens(tokens)
        and matcher.is_accepting()
    )
