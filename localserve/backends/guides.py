"""Constrained answers in the GGUF backend: a grammar (structured output's JSON Schema, or tool
calls' Lark from server/chat/tool_calls.py) becomes a token mask, applied to a slot's logits before
it samples.

The engine is llguidance: it computes the set of tokens the grammar allows next in tens of
microseconds. llama.cpp's own grammar sampler (`llama_sampler_init_grammar`) checks every
token of the vocabulary against the grammar at every step: at 8 concurrent streams on SmolLM2
(49k tokens) it ran at about 0.10x the unconstrained throughput (beside a niced compile), where
the target is 0.9x; with this mask, 1.00x (SmolLM2) and 0.92x (Gemma 3, 262k tokens), as
docs/benchmarks.md records. The mask is written into llama.cpp's logits buffer, so greedy
slots keep the numpy argmax and the others llama.cpp's sampler chain, unchanged. Tool calls
in `auto` mode use llguidance's lazy lexemes: text is free until the call's trigger, as
llama.cpp's lazy grammars do.

A strict schema llguidance cannot enforce is refused with its reason; any other is compiled
leniently, and the daemon reports what went unenforced (server/chat/structured.py).

Each distinct grammar is compiled against a model's vocabulary once, at the submit that brings
it (the check, on the worker's main thread), and kept; each sequence gets a copy of that
matcher (microseconds, where a compile takes milliseconds: 7 ms for Claude Code's tools on
SmolLM2), so the engine thread compiles nothing. The daemon compiled it too, within its
deadline (server/chat/grammar_pool.py), but a compiled grammar cannot cross to this process,
and only here is the vocabulary.
"""

from __future__ import annotations

import json
import threading
import warnings
from typing import TYPE_CHECKING, Any, cast

import numpy as np

from localserve.ground.byte_lru import ByteLRU, text_bytes
from localserve.ground.errors import BadRequest
from localserve.ground.sampling import JSON_STYLE, Grammar

if TYPE_CHECKING:
    from llguidance._lib import JsonCompileOptions


# Compiled matchers kept per model, by the bytes of their grammars' text (a matcher's own size
# grows with it): an agent sends the same tools every turn.
MATCHERS_BYTES = 32 << 20


def _weight(grammar: Grammar, _: Any) -> int:
    return text_bytes((grammar.text, grammar.field, *grammar.dropped))


def _compiled(grammar: Grammar) -> str:
    import llguidance

    what = "the JSON schema" if grammar.kind == "json_schema" else "the tool calls' grammar"
    try:
        if grammar.kind == "lark":
            return llguidance.LLMatcher.grammar_from_lark(grammar.text)
        try:
            schema = json.loads(grammar.text)
        except ValueError as exc:
            raise BadRequest(f"the JSON schema is not JSON: {exc}", grammar.field) from None
        if not isinstance(schema, (dict, bool)):
            raise BadRequest("the JSON schema must be an object", grammar.field)
        style = cast("JsonCompileOptions", {**JSON_STYLE, "lenient": not grammar.strict})
        # The text, now known to be a schema: llguidance reads it as it is.
        return llguidance.LLMatcher.grammar_from_json_schema(grammar.text, overrides=style)
    except (ValueError, TypeError, RuntimeError) as exc:
        raise BadRequest(f"{what} cannot be enforced: {exc}", grammar.field) from None


class Guides:
    """One model's constrained answers: its vocabulary as llguidance reads it (built once, at the
    first constrained request: about a second for 49k tokens), each grammar's matcher compiled
    against it, and a copy of one per slot."""

    def __init__(self, vocab: Any, n_vocab: int) -> None:
        self._vocab = vocab
        self._n_vocab = n_vocab
        self._tokenizer: Any = None
        self._lock = threading.Lock()
        self._slots: dict[int, _Guide] = {}
        self._matchers: ByteLRU[Grammar, Any] = ByteLRU(MATCHERS_BYTES, _weight)
        self._copying = threading.Lock()

    def _tokenizer_ready(self) -> Any:
        # The main thread's check (at a submit) and the engine thread's start may race.
        with self._lock:
            if self._tokenizer is None:
                from llguidance.llamacpp import lltokenizer_from_vocab

                with warnings.catch_warnings():  # it calls a deprecated llama.cpp name per token
                    warnings.simplefilter("ignore", DeprecationWarning)
                    self._tokenizer = lltokenizer_from_vocab(self._vocab, n_vocab=self._n_vocab)
            return self._tokenizer

    def _matcher(self, grammar: Grammar) -> Any:
        """A fresh matcher of `grammar`: a copy of the one compiled at its first use. Two
        threads may compile one grammar at once, at worst: the compile holds no lock, so the
        engine thread never waits for a compile of the main thread's."""
        kept = self._matchers.get(grammar)
        if kept is None:
            import llguidance

            kept = llguidance.LLMatcher(self._tokenizer_ready(), _compiled(grammar))
            self._matchers.put(grammar, kept)
        with self._copying:  # the kept one is read by both threads, and only here
            return kept.deep_copy()

    def check(self, grammar: Grammar) -> None:
        """BadRequest for a grammar that cannot be enforced with this model's vocabulary."""
        matcher = self._matcher(grammar)
        if matcher.is_error():
            what = "the JSON schema" if grammar.kind == "json_schema" else "a tool's parameters"
            raise BadRequest(f"{what} cannot be enforced: {matcher.get_error()}", grammar.field)

    def start(self, slot: int, grammar: Grammar) -> None:
        self._slots[slot] = _Guide(self._matcher(grammar), self._n_vocab)

    def end(self, slot: int) -> None:
        self._slots.pop(slot, None)

    def get(self, slot: int) -> _Guide | None:
        return self._slots.get(slot)

    def __bool__(self) -> bool:
        return bool(self._slots)


# Each byte of llguidance's bitmask, as the 8 values to add to its 8 tokens' logits: 0 for an
# allowed token, -inf for the rest. One gather and one add cost a third of unpacking the bits
# and assigning through a boolean index (0.6 against 1.5 ms for Gemma 3's 262k tokens).
_BYTE_BIAS = np.where(
    np.unpackbits(np.arange(256, dtype=np.uint8)[:, None], axis=1, bitorder="little") == 1,
    0.0,
    -np.inf,
).astype(np.float32)


class _Guide:
    def __init__(self, matcher: Any, n_vocab: int) -> None:
        self.matcher = matcher
        self._bits = np.full((n_vocab + 31) // 32, -1, dtype=np.int32)
        self._n_vocab = n_vocab

    def compute(self) -> None:
        """The grammar's mask for the next token."""
        self.matcher.unsafe_compute_mask_ptr(self._bits.ctypes.data, self._bits.nbytes)

    def allows(self, token: int) -> bool:
        return bool(self._bits[token >> 5] >> (token & 31) & 1)

    def mask(self, logits: np.ndarray) -> None:
        """Set to -inf, in place, the logits of every token the mask does not allow."""
        n = self._n_vocab
        if n % 8 == 0:
            # A mask is nearly always near-empty (between values) or near-full (inside a
            # string): then only the bytes that differ from the rest are touched, about 2.5x
            # faster on Gemma 3 than adding a bias to every logit.
            bits, rows = self._bits.view(np.uint8)[: n // 8], logits.reshape(-1, 8)
            allowed = np.flatnonzero(bits)
            if len(allowed) * 4 < len(bits):
                kept = rows[allowed] + _BYTE_BIAS[bits[allowed]]
                logits.fill(-np.inf)
                rows[allowed] = kept
                return
            partial = np.flatnonzero(bits != 0xFF)
            if len(partial) * 4 < len(bits):
                rows[partial] += _BYTE_BIAS[bits[partial]]
                return
        logits += _BYTE_BIAS[self._bits.view(np.uint8)].reshape(-1)[:n]

    def consume(self, token: int) -> None:
        self.matcher.consume_token(token)
