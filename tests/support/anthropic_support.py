"""What the Anthropic Messages tests share: a greedy request through the official `anthropic`
client (`ask`), the conversation most of them send, and the tool calls of an answer. Their
daemons and clients are agents_support.py's fixtures."""

from __future__ import annotations

HELLO = [{"role": "user", "content": "Say hello."}]


def ask(s, messages=HELLO, **extra):
    """A greedy message (the 2026 SDK no longer names the sampling fields: they go in the
    body)."""
    body = {"temperature": 0, **extra.pop("extra_body", {})}
    for key in ("temperature", "top_p", "top_k"):
        if key in extra:
            body[key] = extra.pop(key)
    return s.anthropic.messages.create(
        model=s.model, messages=messages, extra_body=body, **{"max_tokens": 24, **extra}
    )


def tool_uses(message) -> list:
    return [b for b in message.content if b.type == "tool_use"]
