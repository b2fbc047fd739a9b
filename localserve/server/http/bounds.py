"""Bounds on the work one request may ask for, each a setting (ground/settings.py) far above
what a real client sends: the messages of a conversation and the parts of each, the inputs of
an embeddings request, the tools offered and the size of each, and of an answer's format.

Each item of these lists costs the daemon work a byte of the body does not: a message is
rendered and tokenized, a tool's schema compiled into a grammar, an input embedded into a
vector of floats. The body's size (limits.py) bounds the bytes, not the items: 200,000
one-character inputs fit in 1 MiB. So the lists are counted on the parsed body, before any
face reads it (readers.py's read_json), and a list over its bound is a 400 (413 for the size of
one tool or format) naming the setting, in the face's own error format (errors.py).

Stop strings and `n` are bounded where they are read (validation.py's stop_list; wire/openai.py
takes `n` of 1 only). The tokens of an embeddings request are counted once it is tokenized,
before anything is embedded (`embedding_tokens`, called by server/embeddings.py); a grammar's
compile time is bounded where it is compiled (grammars.py).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from localserve.ground.settings import Settings
from localserve.ground.units import format_size
from localserve.server.http.refused import Refused

JSON = dict[str, Any]

EMBEDDINGS = frozenset({"/v1/embeddings", "/api/embed"})
# Where a conversation is `input`'s items, not `messages`.
RESPONSES = frozenset({"/v1/responses", "/v1/responses/compact"})
# The field that holds an answer's format (a JSON Schema, compiled as a tool's is), by path.
FORMATS = {
    "/v1/chat/completions": "response_format",
    "/api/chat": "format",
    "/api/generate": "format",
    "/v1/responses": "text",
    "/v1/responses/compact": "text",
    "/v1/messages": "output_config",
    "/v1/messages/count_tokens": "output_config",
}


def check(path: str, body: JSON, settings: Settings) -> None:
    """Refused (400 or 413) for the first list of `body` over its bound. A field of the wrong
    type is let through: the face's reader names it with its own 400."""
    if path in EMBEDDINGS:
        count = _inputs(body.get("input"))
        _at_most(settings, "max_embedding_inputs", count, "input", "'input'", "inputs")
        return
    key = "input" if path in RESPONSES else "messages"
    messages = body.get(key)
    if isinstance(messages, list):
        what = "items" if key == "input" else "messages"
        _at_most(settings, "max_messages", len(messages), key, f"'{key}'", what)
        for i, message in enumerate(messages):
            content = message.get("content") if isinstance(message, dict) else None
            if isinstance(content, list):
                where = f"{key}[{i}].content"
                _at_most(settings, "max_message_parts", len(content), key, where, "parts")
    system = body.get("system")  # Anthropic's: a string or text blocks
    if isinstance(system, list):
        _at_most(settings, "max_message_parts", len(system), "system", "'system'", "blocks")
    tools = body.get("tools")
    if isinstance(tools, list):
        offered = list(_tools(tools))
        _at_most(settings, "max_tools", len(offered), "tools", "'tools'", "tools")
        for where, tool in offered:
            _small(tool, settings.max_schema_bytes, "tools", where)
    fmt = FORMATS.get(path)
    if fmt is not None and isinstance(body.get(fmt), dict):
        _small(body[fmt], settings.max_schema_bytes, fmt, f"'{fmt}'")


def _inputs(value: Any) -> int:
    """How many inputs OpenAI's or Ollama's `input` holds: one string, or one list of token
    ids, is one."""
    if not isinstance(value, list) or all(isinstance(t, int) for t in value):
        return 1
    return len(value)


def _tools(tools: list[Any]) -> Iterator[tuple[str, Any]]:
    """Each tool offered, with where it is: a Responses `namespace` tool offers each of its
    own tools, and each counts (Codex puts an MCP server's tools in one)."""
    for i, tool in enumerate(tools):
        inner = tool.get("tools") if isinstance(tool, dict) else None
        if isinstance(tool, dict) and tool.get("type") == "namespace" and isinstance(inner, list):
            yield from ((f"tools[{i}].tools[{j}]", t) for j, t in enumerate(inner))
        else:
            yield f"tools[{i}]", tool


def _at_most(
    settings: Settings, setting: str, count: int, field: str, where: str, what: str
) -> None:
    """A 400 for `count` items over the bound `setting` sets, naming it."""
    limit: int = getattr(settings, setting)
    if count > limit:
        raise Refused(
            400,
            f"{where} holds {count} {what}; at most {limit} are taken ({setting})",
            field,
            setting,
        )


def _small(value: Any, limit: int, field: str, where: str) -> None:
    """A 413 for a tool or format larger than `limit` bytes as compact JSON: its schema is
    compiled into a grammar, whose work grows with it."""
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    size = len(text.encode("utf-8", "surrogatepass"))
    if size > limit:
        raise Refused(
            413,
            f"{where} is {format_size(size)} of JSON; at most {format_size(limit)} is taken "
            "(max_schema_bytes)",
            field,
            "max_schema_bytes",
        )


def embedding_tokens(tokens: list[list[int]], settings: Settings) -> None:
    """A 400 naming max_embedding_tokens for an embeddings request whose inputs, as they will be
    embedded, are more tokens together than it takes. Counted on the tokens the request is
    tokenized into anyway, before any is embedded: each token is a row of a decode, and
    max_embedding_inputs alone lets 2,048 inputs of a whole context each through."""
    count = sum(len(t) for t in tokens)
    _at_most(settings, "max_embedding_tokens", count, "input", "'input'", "tokens")
