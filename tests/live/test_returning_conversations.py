"""A returning conversation whose cells are at hand takes the next free slot before a new long
prompt that queued first: its first token comes after a step's prefill, not after the long
prompt's (engine/batching/priorities.py, quick_first)."""

from __future__ import annotations

import threading
import time

import openai

from tests.support.helpers import NO_END
from tests.support.live import CLIENT_TIMEOUT_S

ONE_SLOT = ("--model", "smollm2", "--parallel", "1", "--ctx", "4096")
LONG_PROMPT = " ".join(f"Fact {i}: the river Danube passes city number {i}." for i in range(120))


def first_token_at(client: openai.OpenAI, messages: list, times: dict, key: str, **kw) -> None:
    stream = client.chat.completions.create(
        model="smollm2", messages=messages, temperature=0, stream=True, **kw
    )
    for chunk in stream:
        if chunk.choices and chunk.choices[0].delta.content and key not in times:
            times[key] = time.monotonic()


def test_a_returning_conversation_is_answered_before_an_older_long_prompt(daemon_factory) -> None:
    _, url = daemon_factory(ONE_SLOT)
    client = openai.OpenAI(
        base_url=f"{url}/v1", api_key="-", timeout=CLIENT_TIMEOUT_S, max_retries=0
    )
    turn = [{"role": "user", "content": "Name a colour of the sky."}]
    answer = client.chat.completions.create(
        model="smollm2", messages=turn, temperature=0, max_tokens=8
    )
    turn += [
        {"role": "assistant", "content": answer.choices[0].message.content or ""},
        {"role": "user", "content": "And one of grass?"},
    ]
    times: dict[str, float] = {}
    busy = [{"role": "user", "content": "Write a very long story about a lighthouse keeper."}]
    holder = threading.Thread(
        target=first_token_at,
        args=(client, busy, times, "busy"),
        kwargs={"max_tokens": 120, "logit_bias": NO_END},
    )
    holder.start()  # the only slot decodes a long answer; the first turn's cells are cached
    while "busy" not in times:
        time.sleep(0.05)
    long_one = threading.Thread(
        target=first_token_at,
        args=(client, [{"role": "user", "content": LONG_PROMPT}], times, "long"),
        kwargs={"max_tokens": 4},
    )
    long_one.start()
    time.sleep(0.5)  # the long prompt queues first
    first_token_at(client, turn, times, "returning", max_tokens=4)
    for t in (holder, long_one):
        t.join()
    assert times["returning"] < times["long"]
