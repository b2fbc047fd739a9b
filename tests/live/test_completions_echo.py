"""/v1/completions' `echo` through the official `openai` client: the answer's text starts with
the prompt. Token log-probabilities are not computed here, so `echo` with `logprobs` is the
logprobs 400; a prompt of token ids is not turned back into text, so echoing one is a 400
naming echo."""

from __future__ import annotations

import openai
import pytest

from tests.support.helpers import MODEL

PROMPT = "Once upon a time, in a small village by the sea,"


def greedy(client, **kwargs):
    return client.completions.create(model=MODEL, temperature=0, max_tokens=8, **kwargs)


def test_echo_returns_the_prompt_followed_by_the_same_completion(client) -> None:
    plain = greedy(client, prompt=PROMPT)
    echoed = greedy(client, prompt=PROMPT, echo=True)
    assert echoed.choices[0].text == PROMPT + plain.choices[0].text
    assert plain.choices[0].text  # the answer itself is there, after the prompt
    assert echoed.usage.completion_tokens == plain.usage.completion_tokens


def test_a_streamed_echo_sends_the_prompt_first_then_the_completion(client) -> None:
    plain = greedy(client, prompt=PROMPT).choices[0].text
    chunks = [c for c in greedy(client, prompt=PROMPT, echo=True, stream=True) if c.choices]
    assert chunks[0].choices[0].text == PROMPT
    assert "".join(c.choices[0].text for c in chunks) == PROMPT + plain


def test_echo_false_returns_only_the_completion(client) -> None:
    plain = greedy(client, prompt=PROMPT)
    assert greedy(client, prompt=PROMPT, echo=False).choices[0].text == plain.choices[0].text
    assert not plain.choices[0].text.startswith(PROMPT)


def test_echo_with_logprobs_is_a_400_naming_logprobs(client) -> None:
    with pytest.raises(openai.BadRequestError) as caught:
        greedy(client, prompt=PROMPT, echo=True, logprobs=1)
    assert caught.value.body["param"] == "logprobs"


def test_echo_of_a_token_id_prompt_is_a_400_naming_echo(client) -> None:
    with pytest.raises(openai.BadRequestError) as caught:
        greedy(client, prompt=[1, 2, 3], echo=True)
    assert caught.value.body["param"] == "echo"
