"""Plain helpers shared by the integration tests (no fixtures: those live in conftest.py)."""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any

from tests.support.daemons import (
    raw_request,  # noqa: F401  (the tests import it from here)
    resident,
)

# The repository's root, and the embedded default model every live test can serve.
REPO = Path(__file__).resolve().parents[2]
MODEL = "smollm2"
# SmolLM2's end tokens (<|endoftext|>, <|im_end|>) banned, as a request's logit_bias: a sampled
# answer then runs to its cap instead of ending in a few tokens.
NO_END = {"0": -100, "2": -100}

# Words that SmolLM2-135M-Instruct, decoding greedily, keeps repeating when the prompt is the
# word repeated with commas ("apple, apple, ..., apple,"  ->  " apple, apple, apple,").
# Each was checked one request at a time against this model before being listed here. They are
# distinct whole words, none a substring of another, so an answer naming a word not its own
# can only have come from another request's KV slot.
COPY_WORDS = (
    "apple",
    "river",
    "tiger",
    "violin",
    "copper",
    "garden",
    "pencil",
    "rocket",
    "window",
    "castle",
    "banana",
    "dragon",
    "silver",
    "forest",
    "candle",
    "hammer",
)

# Tokens for " apple, apple, apple," : three words and three commas.
COPY_TOKENS = 6


def copy_prompt(word: str, times: int = 8) -> str:
    """A prompt the model continues by repeating `word`."""
    return ", ".join([word] * times) + ","


def words_in(text: str, vocabulary: tuple[str, ...] = COPY_WORDS) -> set[str]:
    """Which of the vocabulary's words occur in text as whole words."""
    return {w for w in vocabulary if re.search(rf"\b{re.escape(w)}\b", text)}


def assert_openai_error_shape(body: Any) -> dict[str, Any]:
    """The body is {"error": {"message", "type", "param", "code"}}; returns the inner object."""
    assert isinstance(body, dict) and set(body) == {"error"}, body
    error = body["error"]
    assert isinstance(error, dict), body
    assert {"message", "type", "param", "code"} <= set(error), body
    assert isinstance(error["message"], str) and error["message"], body
    assert isinstance(error["type"], str) and error["type"], body
    return error


def assert_capped_at(response, cap: int) -> None:
    """A chat or text completion that ran into max_tokens: exactly cap tokens, reason length."""
    assert response.usage.completion_tokens == cap
    assert response.choices[0].finish_reason == "length"


def slots_in_use(url: str, model: str = MODEL) -> dict[str, int]:
    """What still holds or wants a slot of the model: the worker's running and queued
    sequences, and the daemon's requests in flight."""
    stats = resident(url)[model]["localserve"]
    return {k: stats[k] for k in ("running", "queued", "in_flight")}


def wait_all_free(url: str, model: str = MODEL, timeout_s: float = 30.0) -> dict[str, int]:
    """`slots_in_use` once nothing holds a slot, or when `timeout_s` has passed."""
    deadline = time.monotonic() + timeout_s
    while True:
        held = slots_in_use(url, model)
        if not any(held.values()) or time.monotonic() > deadline:
            return held
        time.sleep(0.1)
