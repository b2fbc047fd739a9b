"""Every declared wire body, which /openapi.json's components are written from."""

from __future__ import annotations

from localserve.server.anthropic import request as anthropic
from localserve.server.llamacpp.request import INFILL
from localserve.server.responses import request as responses
from localserve.server.wire import ollama, openai
from localserve.server.wire.declare import Body

DECLARED: tuple[Body, ...] = (
    openai.CHAT_COMPLETION,
    openai.COMPLETION,
    ollama.GENERATE,
    ollama.CHAT,
    anthropic.MESSAGES,
    anthropic.COUNT_TOKENS,
    responses.RESPONSES,
    responses.COMPACT,
    INFILL,
)
