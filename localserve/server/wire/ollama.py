"""Ollama's request bodies, declared once: /api/generate and /api/chat, with their `options`.

Ollama's defaults differ from OpenAI's (top_p 0.9, min_p 0, repeat_penalty 1.1 over the last
64 tokens), and an Ollama user expects them: they are what `ollama run` gives. Each reader gives
the value in our terms: num_predict's -1 and -2 (no cap of our own) and seed's -1 (none) read
as None.
"""

from __future__ import annotations

from typing import Any

from localserve.ground.errors import BadRequest
from localserve.server.chat import fim, structured
from localserve.server.chat.tool_calls import read_tools
from localserve.server.http import validation as v
from localserve.server.http.readers import chat_messages
from localserve.server.wire import shapes
from localserve.server.wire.declare import Body, Field, boolean, integer, nested, number, text
from localserve.server.wire.fields import (
    ENGINE_LACKS,
    KEEP_ALIVE_FIELD,
    MODEL_FIELD,
    NO_LIMIT,
    OLLAMA_FORMAT,
    PRIORITY_FIELD,
    SEED,
    SPECULATIVE_FIELD,
    STOP_FIELD,
    THINK,
    TOOL_CHOICE,
    TOOLS,
)

JSON = dict[str, Any]


def _num_predict(o: JSON, key: str) -> int | None:
    # -1: until the window is full; -2: fill the window. Both mean no cap of our own.
    n = v.integer(o, key, -1, -2, NO_LIMIT)
    return None if n is None or n < 0 else max(n, 1)


def _seed(o: JSON, key: str) -> int | None:
    seed = v.integer(o, key, -1, *SEED)
    return None if seed == -1 else seed


def _think(body: JSON, key: str) -> bool | None:
    """Ollama's `think`: true or false, or a level ("high", "medium", "low") that means true."""
    think = body.get(key)
    if think is None or isinstance(think, bool):
        return think
    if think in ("high", "medium", "low"):
        return True
    raise BadRequest("'think' must be true, false, 'high', 'medium' or 'low'", key)


def _context(body: JSON, key: str) -> list[int]:
    context = body.get(key) or []
    # Not true or false: the worker's socket takes whole numbers only (ground/messages.py).
    if not isinstance(context, list) or not all(
        isinstance(t, int) and not isinstance(t, bool) for t in context
    ):
        raise BadRequest("'context' must be a list of token ids", key)
    return context


def _messages(body: JSON, key: str) -> list[dict[str, Any]]:
    return chat_messages(body) if body.get(key) else []  # none: only load or unload


OPTIONS = Body(
    "OllamaOptions",
    {
        "num_predict": Field(
            shapes.integer(-2, NO_LIMIT, -1, "-1: until the window is full; -2: fill it"),
            _num_predict,
            "max_tokens",
        ),
        "seed": Field(
            shapes.integer(*SEED, -1, f"{ENGINE_LACKS}, unless greedy or batched dynamically"),
            _seed,
            "seed",
        ),
        # 0 turns penalties off in Ollama; -1 means the whole window (ollama/options.py).
        "repeat_last_n": integer(-1, NO_LIMIT, 64),
        "repeat_penalty": number(0, 10, 1.1, to="repeat_penalty"),
        "temperature": number(0, 10, 0.8, to="temperature"),
        "top_k": integer(0, NO_LIMIT, 40, to="top_k"),
        "top_p": number(0, 1, 0.9, to="top_p"),
        "min_p": number(0, 1, 0, ENGINE_LACKS, to="min_p"),
        "presence_penalty": number(-2, 2, 0, ENGINE_LACKS, to="presence_penalty"),
        "frequency_penalty": number(-2, 2, 0, ENGINE_LACKS, to="frequency_penalty"),
        "stop": STOP_FIELD,
        "speculative": SPECULATIVE_FIELD,
        "num_ctx": integer(
            1,
            NO_LIMIT,
            doc="up to a slot's context; above it, runs in that (X-Localserve-Context says so)",
        ),
        "num_keep": integer(-1, NO_LIMIT, 4),
        "num_gpu": integer(-1, NO_LIMIT, -1, "layers on a GPU; -1 leaves it to placement"),
        "main_gpu": integer(0, 255, doc="which GPU, 0 first"),
    },
)
COMMON: dict[str, Field] = {
    "model": MODEL_FIELD,
    "stream": boolean(True),
    "options": nested(OPTIONS),
    "format": Field(OLLAMA_FORMAT, lambda body, _: structured.from_format(body)),
    "keep_alive": KEEP_ALIVE_FIELD,
    "think": Field(THINK, _think),
    "priority": PRIORITY_FIELD,
}
GENERATE = Body(
    "GenerateRequest",
    {
        **COMMON,
        "prompt": text("no prompt, context nor suffix: only load (or, with keep_alive 0, unload)"),
        "suffix": Field(shapes.text(), lambda body, _: fim.suffix_of(body)),
        "system": text(),
        "template": text("a Go template: .System, .Prompt"),
        "raw": boolean(False),
        "context": Field(shapes.nullable(shapes.array(shapes.NAT)), _context),
    },
    ("model",),
)
CHAT = Body(
    "ChatRequest",
    {
        **COMMON,
        "tools": Field(TOOLS, lambda body, _: read_tools(body)),
        "tool_choice": Field(TOOL_CHOICE),  # read with the tools
        "parallel_tool_calls": Field(shapes.boolean(True)),  # read with the tools
        "messages": Field(
            shapes.nullable(
                shapes.array(shapes.ref("Message"), description="none: only load or unload")
            ),
            _messages,
        ),
    },
    ("model",),
)
