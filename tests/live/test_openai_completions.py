"""POST /v1/completions (a prompt string, no chat template) through the official `openai` client."""

from __future__ import annotations

import pytest

from tests.support.helpers import COPY_TOKENS, MODEL, assert_capped_at, copy_prompt

PROMPT = "Once upon a time, in a small village by the sea,"


def greedy(client, **kwargs):
    kwargs.setdefault("prompt", PROMPT)
    return client.completions.create(model=MODEL, temperature=0, **kwargs)


def test_non_streamed_completion_has_text_and_consistent_usage(client) -> None:
    r = greedy(client, max_tokens=8)
    assert r.object == "text_completion"
    assert r.model == MODEL
    assert r.id.startswith("cmpl-")
    assert len(r.choices) == 1
    assert isinstance(r.choices[0].text, str) and r.choices[0].text.strip()
    assert r.choices[0].finish_reason in ("stop", "length")
    u = r.usage
    assert u.prompt_tokens > 0
    assert 0 < u.completion_tokens <= 8
    assert u.total_tokens == u.prompt_tokens + u.completion_tokens


def test_streamed_text_equals_the_non_streamed_greedy_text(client) -> None:
    whole = greedy(client, max_tokens=8).choices[0].text
    chunks = list(greedy(client, max_tokens=8, stream=True))
    assert "".join(c.choices[0].text for c in chunks if c.choices) == whole
    assert all(c.object == "text_completion" for c in chunks)
    assert {c.id for c in chunks} == {chunks[0].id}


def test_stream_ends_with_a_chunk_carrying_the_finish_reason(client) -> None:
    chunks = list(greedy(client, max_tokens=4, stream=True))
    reasons = [c.choices[0].finish_reason for c in chunks if c.choices]
    assert reasons[-1] == "length"
    assert all(r is None for r in reasons[:-1])


def test_include_usage_adds_a_final_usage_chunk_matching_the_non_streamed_usage(client) -> None:
    whole = greedy(client, max_tokens=5)
    chunks = list(greedy(client, max_tokens=5, stream=True, stream_options={"include_usage": True}))
    last = chunks[-1]
    assert last.choices == []
    assert last.usage is not None
    assert all(c.usage is None for c in chunks[:-1])
    assert last.usage.prompt_tokens == whole.usage.prompt_tokens
    assert last.usage.completion_tokens == whole.usage.completion_tokens
    assert last.usage.total_tokens == last.usage.prompt_tokens + last.usage.completion_tokens


@pytest.mark.parametrize("cap", [1, 6])
def test_max_tokens_caps_completion_tokens_with_finish_reason_length(client, cap: int) -> None:
    assert_capped_at(greedy(client, max_tokens=cap), cap)


def test_stop_string_ends_the_completion_before_it(client) -> None:
    # Greedy, the model continues "river, river, ..., river," with " river, river, river,".
    r = greedy(client, prompt=copy_prompt("river"), max_tokens=COPY_TOKENS, stop=[","])
    assert r.choices[0].text == " river"
    assert r.choices[0].finish_reason == "stop"


def test_prompt_in_a_one_element_list_is_the_same_prompt(client) -> None:
    plain = greedy(client, max_tokens=4).choices[0].text
    assert greedy(client, prompt=[PROMPT], max_tokens=4).choices[0].text == plain
