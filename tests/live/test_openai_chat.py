"""POST /v1/chat/completions through the official `openai` client, streamed and not.

Answers are compared only under greedy decoding (temperature=0) and only over a few tokens:
the model is tiny and weak, so no test asserts what it knows, only how the server behaves.
"""

from __future__ import annotations

import re

import pytest

from tests.support.helpers import MODEL, assert_capped_at

STORY = [{"role": "user", "content": "Write a short story about a cat."}]


def greedy(client, **kwargs):
    kwargs.setdefault("messages", STORY)
    return client.chat.completions.create(model=MODEL, temperature=0, **kwargs)


def stream_pieces(client, **kwargs) -> tuple[list, list[str]]:
    """All chunks of a greedy streamed answer, and the content pieces in order."""
    chunks = list(greedy(client, stream=True, **kwargs))
    pieces = [
        c.choices[0].delta.content for c in chunks if c.choices and c.choices[0].delta.content
    ]
    return chunks, pieces


def middle_match(pattern: str, text: str) -> str:
    """The match of pattern nearest the middle of text (the answer's own words, never guessed)."""
    matches = [m.group() for m in re.finditer(pattern, text)]
    assert matches, (pattern, text)
    return matches[len(matches) // 2]


@pytest.fixture(scope="module")
def story_pieces(client) -> list[str]:
    """The greedy answer to STORY, 24 tokens, as streamed: one content piece per token."""
    _, pieces = stream_pieces(client, max_tokens=24)
    assert len(pieces) >= 12, pieces
    return pieces


def test_non_streamed_answer_has_assistant_text_and_consistent_usage(client) -> None:
    r = greedy(client, max_tokens=8)
    assert r.object == "chat.completion"
    assert r.model == MODEL
    assert r.id.startswith("chatcmpl-")
    assert len(r.choices) == 1
    choice = r.choices[0]
    assert choice.message.role == "assistant"
    assert isinstance(choice.message.content, str) and choice.message.content.strip()
    assert choice.finish_reason in ("stop", "length")
    u = r.usage
    assert u is not None
    assert u.prompt_tokens > 0
    assert 0 < u.completion_tokens <= 8
    assert u.total_tokens == u.prompt_tokens + u.completion_tokens


def test_streamed_content_equals_the_non_streamed_greedy_answer(client) -> None:
    whole = greedy(client, max_tokens=8).choices[0].message.content
    _, pieces = stream_pieces(client, max_tokens=8)
    assert "".join(pieces) == whole


def test_stream_opens_with_the_assistant_role_and_shares_one_id(client) -> None:
    chunks, _ = stream_pieces(client, max_tokens=4)
    assert chunks[0].choices[0].delta.role == "assistant"
    assert {c.id for c in chunks} == {chunks[0].id}
    assert all(c.object == "chat.completion.chunk" for c in chunks)
    assert all(c.model == MODEL for c in chunks)


def test_stream_ends_with_a_chunk_carrying_the_finish_reason(client) -> None:
    chunks, _ = stream_pieces(client, max_tokens=4)
    reasons = [c.choices[0].finish_reason for c in chunks if c.choices]
    assert reasons[-1] == "length"
    assert all(r is None for r in reasons[:-1])


def test_include_usage_adds_a_final_chunk_with_usage_and_no_choices(client) -> None:
    chunks, pieces = stream_pieces(client, max_tokens=6, stream_options={"include_usage": True})
    last = chunks[-1]
    assert last.choices == []
    assert last.usage is not None
    assert last.usage.prompt_tokens > 0
    assert last.usage.completion_tokens == 6  # finish_reason is "length": the cap was reached
    assert last.usage.total_tokens == last.usage.prompt_tokens + last.usage.completion_tokens
    assert all(c.usage is None for c in chunks[:-1])
    assert pieces


def test_usage_chunk_counts_the_same_prompt_tokens_as_the_non_streamed_answer(client) -> None:
    whole = greedy(client, max_tokens=2)
    chunks, _ = stream_pieces(client, max_tokens=2, stream_options={"include_usage": True})
    assert chunks[-1].usage.prompt_tokens == whole.usage.prompt_tokens


def test_stream_without_include_usage_sends_no_usage(client) -> None:
    chunks, _ = stream_pieces(client, max_tokens=4)
    assert all(c.usage is None for c in chunks)
    assert all(c.choices for c in chunks)


@pytest.mark.parametrize("cap", [1, 5])
def test_max_tokens_caps_completion_tokens_with_finish_reason_length(client, cap: int) -> None:
    assert_capped_at(greedy(client, max_tokens=cap), cap)


def test_max_completion_tokens_caps_like_max_tokens(client) -> None:
    assert_capped_at(greedy(client, max_completion_tokens=3), 3)


def test_stop_word_from_the_middle_of_the_answer_ends_it_just_before(client, story_pieces) -> None:
    text = "".join(story_pieces)
    stop = middle_match(r" \w+", text)
    cut = text.find(stop)
    assert cut > 0, (stop, text)

    r = greedy(client, max_tokens=24, stop=[stop])
    assert r.choices[0].message.content == text[:cut]
    assert r.choices[0].finish_reason == "stop"


def test_stop_string_spanning_a_token_boundary_is_matched(client, story_pieces) -> None:
    text = "".join(story_pieces)
    # Each streamed piece is one token: a stop string made of the last two characters of one
    # piece and the first two of the next can only match across their boundary.
    stop = cut = None
    for i in range(len(story_pieces) // 2, len(story_pieces) - 1):
        left, right = story_pieces[i], story_pieces[i + 1]
        if len(left) < 2 or len(right) < 2:
            continue
        boundary = len("".join(story_pieces[: i + 1]))
        candidate = left[-2:] + right[:2]
        if text.find(candidate) == boundary - 2:
            stop, cut = candidate, boundary - 2
            break
    assert stop is not None, f"no usable token boundary in {story_pieces!r}"

    r = greedy(client, max_tokens=24, stop=stop)
    assert r.choices[0].message.content == text[:cut], stop
    assert r.choices[0].finish_reason == "stop"


def test_streamed_answer_never_leaks_part_of_a_stop_string(client, story_pieces) -> None:
    text = "".join(story_pieces)
    stop = middle_match(r" \w+ \w+", text)  # two consecutive words: several tokens
    cut = text.find(stop)
    assert cut > 0, (stop, text)

    chunks, pieces = stream_pieces(client, max_tokens=24, stop=[stop])
    assert "".join(pieces) == text[:cut]
    reasons = [c.choices[0].finish_reason for c in chunks if c.choices]
    assert reasons[-1] == "stop"


def test_text_content_parts_are_read_like_a_plain_string(client) -> None:
    plain = greedy(client, max_tokens=4).choices[0].message.content
    parts = [{"role": "user", "content": [{"type": "text", "text": STORY[0]["content"]}]}]
    assert greedy(client, max_tokens=4, messages=parts).choices[0].message.content == plain


def test_same_seed_reproduces_a_sampled_answer(client) -> None:
    def sample():
        r = client.chat.completions.create(
            model=MODEL,
            messages=STORY,
            temperature=1.0,
            seed=1234,
            max_tokens=8,
            extra_body={"top_k": 40, "min_p": 0.05},  # llama.cpp's extras, accepted in the body
        )
        return r.choices[0].message.content

    first = sample()
    assert first
    assert sample() == first


def test_penalties_are_applied_through_the_native_sampler_chain(client) -> None:
    r = greedy(
        client,
        max_tokens=4,
        extra_body={"repeat_penalty": 1.1},
        presence_penalty=0.5,
        frequency_penalty=0.5,
    )
    assert r.usage.completion_tokens == 4


# At these caps SmolLM2's greedy Chinese answer ends inside a character (seen: 1, 4, 7 tokens).
CHINESE = [{"role": "user", "content": "Translate to Chinese: I love my family very much."}]


@pytest.mark.parametrize("cap", [1, 4, 7])
def test_a_max_tokens_cut_inside_a_character_drops_it_instead_of_ending_in_u_fffd(
    client, cap: int
) -> None:
    answer = client.chat.completions.create(
        model=MODEL, messages=CHINESE, max_tokens=cap, temperature=0
    )
    streamed = "".join(
        chunk.choices[0].delta.content or ""
        for chunk in client.chat.completions.create(
            model=MODEL, messages=CHINESE, max_tokens=cap, temperature=0, stream=True
        )
        if chunk.choices
    )
    assert answer.choices[0].finish_reason == "length"
    assert "\ufffd" not in answer.choices[0].message.content
    assert streamed == answer.choices[0].message.content


@pytest.mark.parametrize("field", [{"logprobs": True}, {"top_logprobs": 2}])
def test_logprobs_are_refused_with_a_400_rather_than_left_out(client, field) -> None:
    import openai

    with pytest.raises(openai.BadRequestError, match="log-probabilities") as caught:
        client.chat.completions.create(
            model=MODEL, messages=[{"role": "user", "content": "Hi"}], max_tokens=2, **field
        )
    assert caught.value.body["param"] in field


def test_logprobs_false_is_taken(client) -> None:
    answer = client.chat.completions.create(
        model=MODEL, messages=[{"role": "user", "content": "Hi"}], max_tokens=2, logprobs=False
    )
    assert answer.usage.completion_tokens == 2


def test_completions_refuse_logprobs_too(client) -> None:
    import openai

    with pytest.raises(openai.BadRequestError, match="log-probabilities"):
        client.completions.create(model=MODEL, prompt="Hi", max_tokens=2, logprobs=1)


def test_one_model_is_answered_by_its_id(client) -> None:
    import openai

    model = client.models.retrieve(MODEL)
    assert (model.id, model.object, model.owned_by) == (MODEL, "model", "localserve")
    assert client.models.retrieve(f"{MODEL}:latest").id == MODEL
    with pytest.raises(openai.NotFoundError):
        client.models.retrieve("no-such-model")
