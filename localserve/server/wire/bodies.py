"""Every declared wire body, which /openapi.json's components are written from."""

from __future__ import annotations

from localserve.server import embeddings
from localserve.server.anthropic import request as anthropic
from localserve.server.batches.routes import BATCH_REQUEST
from localserve.server.llamacpp.request import INFILL
from localserve.server.responses import request as responses
from localserve.server.wire import ollama, openai, store
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
    embeddings.EMBED,
    embeddings.EMBEDDINGS,
    embeddings.OPENAI_EMBEDDING,
    *store.BODIES,
    BATCH_REQUEST,
)
