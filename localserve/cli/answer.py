"""One streamed answer: tokens written as they arrive, and the timings `--verbose` prints."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from localserve.client import JSON, Client


@dataclass
class Timings:
    """Measured on the client, so they include the HTTP round trip and any queueing."""

    started: float
    first_token: float | None = None
    finished: float | None = None
    prompt_tokens: int = 0
    cached_tokens: int = 0
    completion_tokens: int = 0

    def lines(self) -> list[str]:
        end = self.finished or time.perf_counter()
        first = self.first_token or end
        ttft = first - self.started
        generating = end - first
        prefilled = max(self.prompt_tokens - self.cached_tokens, 0)
        # The first token comes out of the prefill; the rest are the decode.
        decoded = max(self.completion_tokens - 1, 0)
        rows = [
            ("time to first token", f"{ttft * 1000:.0f} ms"),
            ("prompt tokens", f"{self.prompt_tokens} ({self.cached_tokens} cached)"),
            ("prompt rate", _rate(prefilled, ttft)),
            ("generated tokens", str(self.completion_tokens)),
            ("generation rate", _rate(decoded, generating)),
            ("total duration", f"{end - self.started:.2f} s"),
        ]
        return [f"{label + ':':<22}{value}" for label, value in rows]


def _rate(tokens: int, seconds: float) -> str:
    return f"{tokens / seconds:.1f} tokens/s" if seconds > 0 and tokens else "-"


def stream_answer(client: Client, body: JSON, write: Callable[[str], None]) -> tuple[str, Timings]:
    """Send one chat request and write its text as it streams. Ctrl-C (KeyboardInterrupt)
    propagates after the connection is closed, which makes the daemon drop the answer; an
    answer that stops short raises StreamCutOff (from the client) after its text so far."""
    timings = Timings(started=time.perf_counter())
    parts: list[str] = []
    events = client.chat(body)
    flush = getattr(write, "flush", None)
    try:
        for event in events:
            for choice in event.get("choices") or []:
                text = (choice.get("delta") or {}).get("content")
                if text:
                    if timings.first_token is None:
                        timings.first_token = time.perf_counter()
                    parts.append(text)
                    write(text)
            usage = event.get("usage")
            if usage:
                timings.prompt_tokens = int(usage.get("prompt_tokens", 0))
                timings.completion_tokens = int(usage.get("completion_tokens", 0))
                details = usage.get("prompt_tokens_details") or {}
                timings.cached_tokens = int(details.get("cached_tokens", 0) or 0)
    finally:
        events.close()
        if flush is not None:
            flush()
    timings.finished = time.perf_counter()
    return "".join(parts), timings
