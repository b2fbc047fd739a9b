"""bench_soak.py's traffic: the streamed requests its clients send (OpenAI's chat and
completions, Ollama's chat and generate), how a stream is read and cut, the clients that send
them back to back, the warm-up, and the tokens they got over time."""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import random
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import aiohttp

from benchmarks._common import PROMPTS, client_session
from benchmarks._soak_daemons import prompt_caches

# What a request may be, and its path: OpenAI's stream SSE, Ollama's NDJSON.
KINDS = ("openai chat", "openai completions", "ollama chat", "ollama generate")
PATHS = {
    "openai chat": "/v1/chat/completions",
    "openai completions": "/v1/completions",
    "ollama chat": "/api/chat",
    "ollama generate": "/api/generate",
}
CACHE_FULL = 0.9  # the warm-up's end: prompt caches this full


# --- one request ---------------------------------------------------------------------


@dataclass
class Request:
    phase: int
    model: str
    kind: str
    outcome: str = "done"  # "done", "cut" (the client left), or the error
    arrivals: list[float] = field(default_factory=list)  # monotonic, one per chunk of text
    usage: int | None = None  # completion tokens, where the answer's end gave them

    @property
    def error(self) -> bool:
        return self.outcome not in ("done", "cut")

    def weighted(self) -> list[tuple[float, float]]:
        """(time, tokens) per chunk: the answer's token count spread over its chunks; a cut
        answer counts the chunks it got."""
        if not self.arrivals:
            return []
        per = (self.usage if self.usage is not None else len(self.arrivals)) / len(self.arrivals)
        return [(t, per) for t in self.arrivals]


def payload(
    kind: str, model: str, prompt: str, tokens: int, temperature: float, seed: int
) -> dict[str, Any]:
    body: dict[str, Any] = {"model": model, "stream": True}
    if kind.startswith("openai"):
        body.update(
            max_tokens=tokens,
            temperature=temperature,
            seed=seed,
            stream_options={"include_usage": True},
        )
    else:
        body["options"] = {"num_predict": tokens, "temperature": temperature, "seed": seed}
    if kind.endswith("chat"):
        body["messages"] = [{"role": "user", "content": prompt}]
    else:
        body["prompt"] = prompt
    return body


def event_of(kind: str, line: bytes) -> tuple[str, bool, dict[str, Any] | None]:
    """A streamed line's (text, end of the answer, parsed event); blank lines and SSE comments
    give ("", False, None). Raises ValueError on an error event."""
    if kind.startswith("openai"):
        if not line.startswith(b"data:"):
            return "", False, None
        data = line[5:].strip()
        if data == b"[DONE]":
            return "", True, None
        event = json.loads(data)
        if "error" in event:
            raise ValueError(f"stream error: {str(event['error'])[:160]}")
        choice = (event.get("choices") or [{}])[0]
        text = (choice.get("delta") or {}).get("content") or choice.get("text") or ""
        return text, False, event
    if not line.strip():
        return "", False, None
    event = json.loads(line)
    if "error" in event:
        raise ValueError(f"stream error: {str(event['error'])[:160]}")
    text = (event.get("message") or {}).get("content") or event.get("response") or ""
    return text, bool(event.get("done")), event


async def stream(
    session: aiohttp.ClientSession,
    base: str,
    req: Request,
    body: dict[str, Any],
    cut_after: int | None,
) -> Request:
    """Send one streamed request; with `cut_after`, close its connection after that many
    chunks of text. Failures become `req.outcome`, never raised."""
    try:
        async with session.post(base + PATHS[req.kind], json=body) as r:
            if r.status != 200:
                req.outcome = f"HTTP {r.status}: {(await r.text())[:160]}"
                return req
            async for line in r.content:
                text, end, event = event_of(req.kind, line)
                if event is not None:
                    usage = event.get("usage") or {}
                    req.usage = usage.get("completion_tokens", event.get("eval_count", req.usage))
                if end:
                    return req
                if text:
                    req.arrivals.append(time.monotonic())
                    if cut_after is not None and len(req.arrivals) >= cut_after:
                        r.close()  # the client leaves mid-answer
                        req.outcome = "cut"
                        return req
            req.outcome = "stream ended without its end"
    except ValueError as exc:
        req.outcome = str(exc)
    except (aiohttp.ClientError, asyncio.TimeoutError) as exc:
        req.outcome = f"{type(exc).__name__}: {exc}"[:200]
    return req


def error_kind(outcome: str) -> str:
    """An error's kind: its status or exception name, without the details."""
    return outcome.split(":", 1)[0]


# --- traffic -------------------------------------------------------------------------


async def traffic(
    base: str, models: list[str], phase: int, seconds: float, args: argparse.Namespace
) -> tuple[list[Request], float, float]:
    """--streams clients sending back to back for `seconds`; requests in flight at the end
    run to their end. Returns the requests and the phase's (start, deadline)."""
    out: list[Request] = []
    t0 = time.monotonic()
    deadline = t0 + seconds

    async def client(i: int, session: aiohttp.ClientSession) -> None:
        rng = random.Random(args.seed * 1000 + phase * 100 + i)
        model = models[i % len(models)]
        while time.monotonic() < deadline:
            kind = rng.choice(KINDS)
            body = payload(
                kind,
                model,
                rng.choice(PROMPTS),
                args.max_tokens,
                rng.choice((0.0, 0.8)),
                rng.randrange(1 << 16),
            )
            cut = rng.randint(1, 4) if rng.random() < args.disconnect else None
            out.append(await stream(session, base, Request(phase, model, kind), body, cut))

    async with client_session() as session:
        await asyncio.gather(*(client(i, session) for i in range(args.streams)))
    return out, t0, deadline


def run_traffic(
    base: str, models: list[str], phase: int, seconds: float, args: argparse.Namespace
) -> tuple[list[Request], float, float]:
    reqs, t0, t1 = asyncio.run(traffic(base, models, phase, seconds, args))
    errors = [r for r in reqs if r.error]
    print(
        f"  phase {phase}: {len(reqs)} requests, {sum(r.outcome == 'cut' for r in reqs)} "
        f"cut, {len(errors)} errors, {tokens_in(reqs, t0, t1) / (t1 - t0):.1f} tok/s",
        flush=True,
    )
    for outcome, n in Counter(r.outcome for r in errors).most_common(5):
        print(f"    {n} x {outcome}", flush=True)
    return reqs, t0, t1


def tokens_in(reqs: list[Request], t0: float, t1: float) -> float:
    return sum(n for r in reqs for t, n in r.weighted() if t0 <= t < t1)


def series(reqs: list[Request], t0: float, t1: float, bucket_s: float) -> list[tuple[float, float]]:
    """(seconds into the phase, tok/s) per bucket."""
    out = []
    n = max(1, round((t1 - t0) / bucket_s))
    width = (t1 - t0) / n
    for k in range(n):
        a = t0 + k * width
        out.append((k * width, tokens_in(reqs, a, a + width) / width))
    return out


# --- warm-up -------------------------------------------------------------------------


async def one_request(session: aiohttp.ClientSession, base: str, model: str, kind: str) -> None:
    """A short greedy request that must succeed."""
    req = await stream(
        session, base, Request(0, model, kind), payload(kind, model, PROMPTS[0], 8, 0.0, 0), None
    )
    if req.error:
        raise RuntimeError(f"a request to {model} ({kind}) failed: {req.outcome}")


async def make_resident(base: str, model: str) -> None:
    """One short request to `model`, so that a swapping daemon holds it when its memory is
    read: RSS after warm-up and at the end then compare like with like."""
    async with client_session() as session:
        await one_request(session, base, model, KINDS[0])


async def warm_up(
    base: str, models: list[str], args: argparse.Namespace, seconds: float = 0.0, most: float = 0.0
) -> tuple[float, list[Request]]:
    """Every kind of request once per model, then `seconds` of the run's own traffic, and more
    (in steps of a tenth of `most`) until the prompt caches are nearly full or `most` seconds
    have passed: the slots' KV pages are in use and the caches have stopped growing before RSS
    is read. Returns the seconds of traffic and its requests that failed: the run's errors
    count them too, since a warm-up that hides errors would hide a daemon's early failures."""
    async with client_session() as session:
        for model in models:
            for kind in KINDS:
                await one_request(session, base, model, kind)
    t0 = time.monotonic()
    reqs = (await traffic(base, models, 0, seconds, args))[0] if seconds > 0 else []
    rounds = itertools.count(-1, -1)  # other seeds each round: new answers for the caches
    while time.monotonic() - t0 < most:
        held, limit = await asyncio.to_thread(prompt_caches, base)
        if held >= CACHE_FULL * limit:
            break
        reqs += (await traffic(base, models, next(rounds), most / 10, args))[0]
    failed = [r for r in reqs if r.error]
    for outcome, n in Counter(r.outcome for r in failed).most_common():
        print(f"  warm-up error: {n} x {outcome}", flush=True)
    return time.monotonic() - t0, failed
