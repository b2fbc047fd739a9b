"""Disconnect churn (#16): 1,000 clients that close their connection mid-stream, on both faces,
leave every slot free, and the next burst of `--parallel` requests gets every slot at once.

One daemon for the module (smollm2, 8 slots of 512 tokens); the churn runs once, in the
fixture, 50 streams at a time. Each stream reads one or two chunks of its answer, then closes
its connection: aiohttp cancels the handler, which cancels the sequence in the worker.

The daemon decodes on one thread: what is tested is the slots' bookkeeping, and on a machine
whose cores other work shares, llama.cpp's threads waiting for each other made the churn four
times slower (100 requests: 40 s on two threads, 11 s on one)."""

from __future__ import annotations

import asyncio
import json
import time
from collections import Counter
from collections.abc import Iterator
from typing import Any

import aiohttp
import pytest

from tests.support.daemons import resident
from tests.support.helpers import MODEL, wait_all_free
from tests.support.live import running_daemon

PARALLEL = 8
CLIENTS = 1000
AT_ONCE = 50
# Long enough that no answer ends before its client leaves.
MAX_TOKENS = 64
BURST_TOKENS = 32
FREE_TIMEOUT_S = 30.0
PROMPTS = [
    f"Write a long story about {x}." for x in ("a lighthouse", "a dragon", "a robot", "a sailor")
]


def body(face: str, prompt: str, tokens: int) -> tuple[str, dict[str, Any]]:
    messages = [{"role": "user", "content": prompt}]
    if face == "openai":
        return "/v1/chat/completions", {
            "model": MODEL,
            "messages": messages,
            "stream": True,
            "max_tokens": tokens,
            "temperature": 0,
        }
    return "/api/chat", {
        "model": MODEL,
        "messages": messages,
        "stream": True,
        "options": {"num_predict": tokens, "temperature": 0},
    }


def content(face: str, line: bytes) -> tuple[str, bool]:
    """A streamed line's text and whether it ends the answer, on either face."""
    if face == "openai":
        if not line.startswith(b"data:"):
            return "", False
        data = line[5:].strip()
        if data == b"[DONE]":
            return "", True
        event = json.loads(data)
        if "error" in event:
            raise AssertionError(f"stream error: {event['error']}")
        delta = (event["choices"] or [{}])[0].get("delta") or {}
        return delta.get("content") or "", False
    if not line.strip():
        return "", False
    event = json.loads(line)
    if "error" in event:
        raise AssertionError(f"stream error: {event['error']}")
    return event["message"]["content"], bool(event.get("done"))


async def leave_mid_stream(session: aiohttp.ClientSession, url: str, i: int) -> str:
    """Stream request i, read one or two chunks of text, close the connection: "cut". An answer
    that ended first is "finished"; anything else is its error."""
    face = ("openai", "ollama")[i % 2]
    path, payload = body(face, PROMPTS[i % len(PROMPTS)], MAX_TOKENS)
    wanted = 1 + (i // 2) % 2
    try:
        async with session.post(url + path, json=payload) as r:
            if r.status != 200:
                return f"HTTP {r.status}"
            chunks = 0
            async for line in r.content:
                text, done = content(face, line)
                if done:
                    return "finished"
                chunks += bool(text)
                if chunks >= wanted:
                    r.close()  # the connection goes now, mid-answer
                    return "cut"
            return "ended without its end"
    except (aiohttp.ClientError, asyncio.TimeoutError, AssertionError) as exc:
        return f"{type(exc).__name__}: {exc}"


async def churn(url: str) -> Counter[str]:
    gate = asyncio.Semaphore(AT_ONCE)
    timeout = aiohttp.ClientTimeout(total=120)
    connector = aiohttp.TCPConnector(limit=0, force_close=True)
    async with aiohttp.ClientSession(timeout=timeout, connector=connector) as session:

        async def one(i: int) -> str:
            async with gate:
                return await leave_mid_stream(session, url, i)

        return Counter(await asyncio.gather(*(one(i) for i in range(CLIENTS))))


@pytest.fixture(scope="module")
def churned() -> Iterator[tuple[str, Counter[str]]]:
    args = ("--model", MODEL, "--parallel", str(PARALLEL), "--ctx", "512", "--threads", "1")
    with running_daemon(args) as (_, url):
        yield url, asyncio.run(churn(url))


def test_a_thousand_clients_each_leave_mid_stream(churned) -> None:
    _, outcomes = churned
    assert outcomes == Counter({"cut": CLIENTS})


def test_a_thousand_mid_stream_disconnects_leave_every_slot_free(churned) -> None:
    url, _ = churned
    assert wait_all_free(url, MODEL, FREE_TIMEOUT_S) == {"running": 0, "queued": 0, "in_flight": 0}
    assert resident(url)[MODEL]["localserve"]["slots"] == PARALLEL


async def burst(url: str) -> tuple[list[tuple[float, float, str]], int]:
    """`PARALLEL` streams at once: each one's (first text, end, finish reason); and the most
    sequences /api/ps saw running meanwhile."""
    peak = 0
    done = asyncio.Event()

    async def watch(session: aiohttp.ClientSession) -> None:
        nonlocal peak
        while not done.is_set():
            async with session.get(url + "/api/ps") as r:
                for m in (await r.json())["models"]:
                    peak = max(peak, m["localserve"]["running"])
            await asyncio.sleep(0.02)

    async def one(session: aiohttp.ClientSession, i: int) -> tuple[float, float, str]:
        path, payload = body("openai", PROMPTS[i % len(PROMPTS)], BURST_TOKENS)
        first, reason = 0.0, ""
        async with session.post(url + path, json=payload) as r:
            assert r.status == 200, await r.text()
            async for line in r.content:
                if not line.startswith(b"data:") or line[5:].strip() == b"[DONE]":
                    continue
                choice = json.loads(line[5:])["choices"][0]
                if choice["delta"].get("content") and not first:
                    first = time.monotonic()
                reason = choice.get("finish_reason") or reason
        return first, time.monotonic(), reason

    timeout = aiohttp.ClientTimeout(total=120)
    connector = aiohttp.TCPConnector(limit=0, force_close=True)
    async with aiohttp.ClientSession(timeout=timeout, connector=connector) as session:
        watcher = asyncio.create_task(watch(session))
        try:
            answers = await asyncio.gather(*(one(session, i) for i in range(PARALLEL)))
        finally:
            done.set()
            await watcher
    return answers, peak


def test_after_the_disconnects_a_burst_gets_every_slot_at_once(churned) -> None:
    url, _ = churned
    assert wait_all_free(url, MODEL, FREE_TIMEOUT_S) == {"running": 0, "queued": 0, "in_flight": 0}
    answers, peak = asyncio.run(burst(url))
    assert [reason for _, _, reason in answers] == ["length"] * PARALLEL
    # Every answer had begun before any ended: none waited for another's slot.
    assert max(first for first, _, _ in answers) < min(end for _, end, _ in answers)
    assert peak == PARALLEL
