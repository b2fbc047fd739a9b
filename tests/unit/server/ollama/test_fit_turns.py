"""An Ollama chat fitted to its window (server/ollama/turns.py): its oldest turns dropped, each
message tokenized once however many go, and the turns kept those the old one-at-a-time loop
kept. A fake template stands in for the model's: a fixed head, then each message's words and
a wrapping of its own."""

from __future__ import annotations

import asyncio
import random
from typing import Any

from localserve.server.ollama.turns import MAX_RENDERS, Message, fit_turns

HEAD = 20  # the template's own tokens: BOS, the generation prompt, a tools' listing
WRAP = 4  # a role's header and footer


class FakeModel:
    """Counts every text it tokenizes, and renders as a template would: each token is the
    index of the message it belongs to, so the tokens say which messages were kept."""

    def __init__(self) -> None:
        self.renders = 0
        self.counted: list[str] = []
        self.count_trips = 0

    async def encode(self, messages: list[Message]) -> list[int]:
        self.renders += 1
        tokens = [-1] * HEAD
        for m in messages:
            tokens += [m["id"]] * (len(m["content"].split()) + WRAP)
        return tokens

    async def count(self, texts: list[str]) -> list[int]:
        self.count_trips += 1
        self.counted += texts
        return [len(t.split()) for t in texts]


def fit(messages: list[Message], ctx: int) -> tuple[list[int], FakeModel]:
    model = FakeModel()
    tokens = asyncio.run(fit_turns(messages, ctx, model.encode, model.count))
    return tokens, model


def kept(tokens: list[int]) -> list[int]:
    return sorted({t for t in tokens if t >= 0})


def turn(i: int, words: int, role: str = "") -> Message:
    role = role or ("user" if i % 2 else "assistant")
    return {"id": i, "role": role, "content": " ".join(["w"] * words)}


def conversation(sizes: list[int]) -> list[Message]:
    return [turn(0, 5, "system"), *(turn(i + 1, n) for i, n in enumerate(sizes))]


def one_at_a_time(messages: list[Message], ctx: int) -> list[int]:
    """What fit_turns replaced: drop the oldest turn, render it all again, until it fits."""
    model = FakeModel()
    tokens = asyncio.run(model.encode(messages))
    while len(tokens) >= ctx:
        oldest = next((i for i, m in enumerate(messages[:-1]) if m["role"] != "system"), None)
        if oldest is None:
            break
        messages = messages[:oldest] + messages[oldest + 1 :]
        tokens = asyncio.run(model.encode(messages))
    return tokens


def test_a_conversation_that_fits_is_rendered_once_and_nothing_more_is_tokenized() -> None:
    messages = conversation([10, 10, 10])
    tokens, model = fit(messages, 4096)
    assert kept(tokens) == [0, 1, 2, 3]
    assert model.renders == 1 and model.count_trips == 0


def test_each_message_is_tokenized_once_however_many_turns_are_dropped() -> None:
    messages = conversation([1] * 30_000)  # issue #57: 30,000 short turns, num_ctx 16
    tokens, model = fit(messages, 16)
    assert model.count_trips == 1 and len(model.counted) == len(messages)
    assert model.renders <= MAX_RENDERS


def test_too_long_even_alone_the_system_message_and_the_last_are_what_is_left() -> None:
    tokens, _ = fit(conversation([1] * 30_000), 16)
    assert kept(tokens) == [0, 30_000]


def test_the_turns_kept_are_those_the_one_at_a_time_loop_kept() -> None:
    rng = random.Random(57)
    for _ in range(200):
        messages = conversation([rng.randint(0, 60) for _ in range(rng.randint(1, 40))])
        ctx = rng.randint(16, 1200)
        tokens, model = fit(messages, ctx)
        assert kept(tokens) == kept(one_at_a_time(messages, ctx)), (len(messages), ctx)
        assert model.renders <= MAX_RENDERS


def test_system_messages_are_never_dropped_wherever_they_are() -> None:
    messages = [turn(0, 50), turn(1, 5, "system"), turn(2, 50), turn(3, 5)]
    tokens, _ = fit(messages, 60)
    assert kept(tokens) == [1, 3]


def test_a_message_with_no_text_is_not_sent_to_be_tokenized() -> None:
    messages: list[Any] = [turn(0, 40), {"id": 1, "role": "assistant", "content": ""}, turn(2, 3)]
    _, model = fit(messages, 30)
    assert "" not in model.counted and len(model.counted) == 2
