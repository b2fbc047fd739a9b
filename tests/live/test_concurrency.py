"""Concurrent requests share the batch but never each other's KV slot, and abandoned ones let go.

The prompts are "word, word, ..., word," for 16 different words: greedy, the model goes on
repeating the word of its own prompt (each word was checked alone against this model). A
sequence that attended to another slot's cells, or a slot reused with stale cells, would show a
word from another request.
"""

from __future__ import annotations

import asyncio

import pytest

from tests.support.helpers import COPY_TOKENS, COPY_WORDS, MODEL, copy_prompt, words_in

# Generous bounds, not timing assertions: 16 short answers take seconds on 2 idle cores.
BURST_TIMEOUT_S = 90.0
# An abandoned stream asks for this many tokens: held slots would keep a new burst waiting
# for ~1000 batched steps (minutes here), far past BURST_TIMEOUT_S.
ABANDONED_MAX_TOKENS = 1000


async def stream_copy(client, word: str, max_tokens: int = COPY_TOKENS) -> tuple[str, str | None]:
    """Stream a greedy continuation of copy_prompt(word): (text, finish_reason)."""
    stream = await client.completions.create(
        model=MODEL, prompt=copy_prompt(word), temperature=0, max_tokens=max_tokens, stream=True
    )
    text, reason = [], None
    async for chunk in stream:
        if chunk.choices:
            text.append(chunk.choices[0].text)
            reason = chunk.choices[0].finish_reason or reason
    return "".join(text), reason


async def burst(client, what: str) -> list[tuple[str, str | None]]:
    """One greedy copying stream per word, all at once; fails the test past BURST_TIMEOUT_S."""
    try:
        return await asyncio.wait_for(
            asyncio.gather(*(stream_copy(client, w) for w in COPY_WORDS)), BURST_TIMEOUT_S
        )
    except asyncio.TimeoutError:
        pytest.fail(f"{what} did not all finish within {BURST_TIMEOUT_S:.0f} s", pytrace=False)


def assert_each_answer_is_its_own(results: list[tuple[str, str | None]]) -> None:
    report = "\n".join(f"  {w!r}: {t!r} ({r})" for w, (t, r) in zip(COPY_WORDS, results))
    for word, (text, reason) in zip(COPY_WORDS, results):
        assert reason in ("length", "stop"), f"{word!r} did not finish:\n{report}"
        found = words_in(text)
        assert found == {word}, (
            f"the answer to the {word!r} prompt names {sorted(found)}; all answers:\n{report}"
        )
        assert text.count(word) >= 2, f"{word!r} was not copied:\n{report}"


def test_sixteen_concurrent_streams_each_continue_their_own_prompt(async_client_factory) -> None:
    async def main():
        client = async_client_factory()
        try:
            return await burst(client, "16 concurrent streams")
        finally:
            await client.close()

    results = asyncio.run(main())
    assert_each_answer_is_its_own(results)


def test_streams_closed_by_their_clients_free_their_slots(async_client_factory) -> None:
    """16 long streams fill every slot; closed after two chunks, they must not hold them."""
    # Each abandoned stream repeats another burst request's word, so a slot handed over with
    # the old cells still in it would show up as a foreign word in the burst's answers.
    rotated = COPY_WORDS[8:] + COPY_WORDS[:8]

    async def open_and_read_two_chunks(client, word: str):
        stream = await client.completions.create(
            model=MODEL,
            prompt=copy_prompt(word),
            temperature=0,
            max_tokens=ABANDONED_MAX_TOKENS,
            stream=True,
        )
        chunks = stream.__aiter__()
        for _ in range(2):
            chunk = await chunks.__anext__()
            assert chunk.choices[0].finish_reason is None
        return stream

    async def main():
        client = async_client_factory()
        try:
            streams = await asyncio.wait_for(
                asyncio.gather(*(open_and_read_two_chunks(client, w) for w in rotated)),
                BURST_TIMEOUT_S,
            )
            # Every slot is now busy with a stream that has ~1000 tokens to go: walk away.
            await asyncio.gather(*(s.close() for s in streams))
            return await burst(
                client,
                "16 new streams after 16 long ones were closed (do the closed ones still hold "
                "their slots?)",
            )
        finally:
            await client.close()

    results = asyncio.run(main())
    assert_each_answer_is_its_own(results)
