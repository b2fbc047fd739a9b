"""The hostile inputs of bench_hostile.py (issue #57's list), each a case: the requests one
careless or hostile client sends, built when the case runs (some bodies are 16 MiB) and varied by
round, so that no round finds the one before it in a cache.

Each case names the daemon's default bounds it goes up to, from Settings(), so the inputs follow
a changed default; the rest are the issue's own figures.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from localserve.ground.settings import Settings
from localserve.server.http.validation import MAX_STOP_CHARS, MAX_STOPS

MODEL = "smollm2"
DEFAULTS = Settings()
BODY = DEFAULTS.max_body  # generation's and embeddings' body limit (16 MiB)
SMALL_BODY = 1 << 20  # every other endpoint's (server/http/limits.py)
JSON = dict[str, Any]


@dataclass(frozen=True)
class Hostile:
    """One request: POST `path` with `body`."""

    path: str
    body: bytes
    content_type: str = "application/json"


@dataclass(frozen=True)
class Case:
    name: str
    what: str  # the doc's line on what is sent
    build: Callable[[int], list[Hostile]]  # the round's requests, sent one after the other
    max_loads: int | None = None  # model loads the case may cause, where the issue sets a bound


def post(path: str, body: JSON) -> Hostile:
    return Hostile(path, json.dumps(body, separators=(",", ":")).encode())


def filled(head: bytes, unit: bytes, tail: bytes, size: int) -> bytes:
    """`head`, then `unit` as many times as fit with `tail` in `size` bytes, then `tail`."""
    return head + unit * ((size - len(head) - len(tail)) // len(unit)) + tail


def chat(extra: JSON, content: str = "Hi") -> JSON:
    """An OpenAI chat completion that, answered, is short."""
    return {
        "model": MODEL,
        "messages": [{"role": "user", "content": content}],
        "max_tokens": 4,
        **extra,
    }


def ollama(extra: JSON, options: JSON | None = None) -> JSON:
    """An Ollama body that, answered, is short."""
    return {
        "model": MODEL,
        "stream": False,
        "options": {"num_predict": 1, **(options or {})},
    } | extra


def generate(extra: JSON, options: JSON | None = None) -> Hostile:
    return post("/api/generate", {"prompt": "Hi", **ollama(extra, options)})


# --- JSON read linearly ------------------------------------------------------------------

CHAT_HEAD = b'{"model":"smollm2","max_tokens":4,"messages":[{"role":"user","content":"'


def escaped_quotes(size: int) -> Callable[[int], list[Hostile]]:
    # An unterminated string of escaped quotes: the old depth check's regex was quadratic on it.
    return lambda r: [Hostile("/v1/chat/completions", filled(CHAT_HEAD, b'\\"', b"", size))]


def deep(r: int) -> list[Hostile]:
    return [Hostile("/v1/chat/completions", b"[" * BODY)]


def wide(r: int) -> list[Hostile]:
    # Balanced: depth 2 at most, so every bracket is counted, and the decoder builds each list.
    head = b'{"model":"smollm2","max_tokens":4,"messages":[{"role":"user","content":"Hi"}],"x":['
    return [Hostile("/v1/chat/completions", filled(head, b"[],", b"[]]}", BODY))]


def token_ids(r: int) -> list[Hostile]:
    # A prompt of token ids: millions of integers for the decoder, then far past the context.
    head = b'{"model":"smollm2","max_tokens":4,"prompt":['
    return [Hostile("/v1/completions", filled(head, f"{1 + r},".encode(), b"1]}", BODY))]


def long_text(r: int) -> list[Hostile]:
    tail = b'"}]}'
    return [Hostile("/v1/chat/completions", filled(CHAT_HEAD, f"w{r} ".encode(), tail, BODY))]


# --- fields read linearly ----------------------------------------------------------------


def keep_alive(r: int) -> list[Hostile]:
    digits = {"keep_alive": "1" * 32000 + "x"}
    return [
        post("/api/chat", ollama({"messages": [{"role": "user", "content": "Hi"}], **digits})),
        generate(digits),
    ]


def template(r: int) -> list[Hostile]:
    # Unterminated, the spaces are the prompt: num_ctx 16 keeps its prefill out of the time.
    # Closed, it is an action the template does not take: a 400 once it is read.
    return [
        generate({"template": "{{" + " " * 10_000}, {"num_ctx": 16}),
        generate({"template": "{{" + " " * 100_000 + "}}"}),
    ]


def spaces(r: int) -> list[Hostile]:
    # One run of whitespace is one word for the tokenizer's pre-split: 100,000 spaces took
    # 1 to 3.5 s to tokenize where 20,000 words took 0.3 s. num_ctx 16 cuts it after that.
    return [generate({"prompt": " " * (1 << 20) + f"{r}"}, {"num_ctx": 16})]


# --- bounded work --------------------------------------------------------------------------


def turns(n: int) -> Callable[[int], list[Hostile]]:
    def build(r: int) -> list[Hostile]:
        roles = ("user", "assistant")
        said = [{"role": roles[i % 2], "content": f"t{r} {i}"} for i in range(n - 1)]
        said.append({"role": "user", "content": "Hi"})
        return [post("/api/chat", ollama({"messages": said}, {"num_ctx": 16}))]

    return build


def embeddings(n: int, paths: tuple[str, ...]) -> Callable[[int], list[Hostile]]:
    return lambda r: [post(p, {"model": MODEL, "input": [chr(97 + r)] * n}) for p in paths]


def _ranges(name: str, seed: int, limit: int) -> JSON:
    """A tool whose schema is integer ranges, as many as fit in `limit` bytes of compact JSON:
    about 0.8 s for llguidance to compile 64 KiB of them (a string pattern is ten times
    quicker)."""
    props: JSON = {}
    params = {"type": "object", "properties": props}
    tool: JSON = {"type": "function", "function": {"name": name, "parameters": params}}
    size = len(json.dumps(tool, separators=(",", ":")))  # with props empty
    for i in itertools.count():
        lo, hi = -123456789123 + (seed + i) * 7919, 987654321987 - (seed + i) * 104729
        prop = {"type": "integer", "minimum": lo, "maximum": hi}
        size += len(f'"{i}":{json.dumps(prop, separators=(",", ":"))}') + (1 if props else 0)
        if size > limit:
            return tool
        props[f"{i}"] = prop
    raise AssertionError("unreachable")


def schema_tools(count: int) -> Callable[[int], list[Hostile]]:
    def build(r: int) -> list[Hostile]:
        limit = DEFAULTS.max_schema_bytes
        # Other bounds in every tool and round: no grammar is found compiled.
        tools = [_ranges(f"t{k}", 1000 * (r * count + k), limit) for k in range(count)]
        return [post("/v1/chat/completions", chat({"tools": tools, "tool_choice": "required"}))]

    return build


def many_tools(r: int) -> list[Hostile]:
    params = {"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "integer"}}}
    tools = [
        {"type": "function", "function": {"name": f"f{r}_{i}", "parameters": params}}
        for i in range(DEFAULTS.max_tools)
    ]
    return [post("/v1/chat/completions", chat({"tools": tools, "tool_choice": "required"}))]


def tool_name(r: int) -> list[Hostile]:
    name = f"n{r}" + "x" * (DEFAULTS.max_schema_bytes - 200)
    tool = {"type": "function", "function": {"name": name, "parameters": {"type": "object"}}}
    return [post("/v1/chat/completions", chat({"tools": [tool], "tool_choice": "required"}))]


def compaction(r: int) -> list[Hostile]:
    summary = {"type": "compaction", "encrypted_content": f"Round {r}: the story so far. " * 14}
    pair = [{"role": "user", "content": "Go on."}, summary]
    size = len(json.dumps(pair))
    items = pair * ((SMALL_BODY - 4096) // size) + [{"role": "user", "content": "And now?"}]
    body = {"model": MODEL, "input": items, "max_output_tokens": 8}
    return [post("/v1/responses/compact", body)]


def stops(count: int, chars: int) -> Callable[[int], list[Hostile]]:
    def build(r: int) -> list[Hostile]:
        stop = [f"{r}{i}".ljust(chars, "z") for i in range(count)]
        return [post("/v1/chat/completions", chat({"stop": stop}))]

    return build


def many_n(r: int) -> list[Hostile]:
    return [post("/v1/chat/completions", chat({"n": 1_000_000}))]


def batch_line(r: int) -> list[Hostile]:
    # One JSONL line of 16 MiB of token ids: the upload's check parses it on a thread, which
    # holds the GIL for the whole of the decoder's one call.
    line = filled(
        b'{"custom_id":"a","method":"POST","url":"/v1/completions","body":{"model":"smollm2",'
        b'"prompt":[',
        f"{1 + r},".encode(),
        b"1]}}\n",
        BODY,
    )
    boundary = f"hostile{r}"
    form = (
        f'--{boundary}\r\nContent-Disposition: form-data; name="purpose"\r\n\r\nbatch\r\n'
        f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="a.jsonl"\r\n'
        "Content-Type: application/jsonl\r\n\r\n"
    ).encode()
    body = form + line + f"\r\n--{boundary}--\r\n".encode()
    return [Hostile("/v1/files", body, f"multipart/form-data; boundary={boundary}")]


# --- reloads -------------------------------------------------------------------------------


def num_gpu_storm(r: int) -> list[Hostile]:
    return [generate({}, {"num_gpu": 1 + i % 2}) for i in range(20)]


def num_ctx_ladder(r: int) -> list[Hostile]:
    return [generate({}, {"num_ctx": 4096 * k}) for k in range(1, 9)]


def main_gpu(r: int) -> list[Hostile]:
    return [generate({}, {"main_gpu": 3})]


N = DEFAULTS.max_messages, DEFAULTS.max_embedding_inputs, DEFAULTS.max_tools
# Names without commas or spaces: --cases takes a list of them.
CASES = [
    Case("quotes-1MiB", '`"\\"\\"\\"...` unterminated, 1 MiB (chat)', escaped_quotes(1 << 20)),
    Case("quotes-16MiB", "the same to the body limit", escaped_quotes(BODY)),
    Case("nested-16MiB", "`[` to the body limit", deep),
    Case("balanced-16MiB", "`[],` to the body limit in one field of a chat", wide),
    Case("ids-16MiB", "a /v1/completions prompt of token ids to the body limit", token_ids),
    Case("text-16MiB", "one chat message's text to the body limit", long_text),
    Case("keep-alive", '`"1"*32000+"x"` on /api/chat and /api/generate', keep_alive),
    Case(
        "template",
        '/api/generate: `"{{"` and 10,000 spaces (num_ctx 16); `"{{"`, 100,000 spaces, `"}}"`',
        template,
    ),
    Case("spaces-1MiB", "an /api/generate prompt of a million spaces, num_ctx 16", spaces),
    Case("turns-30000", "/api/chat, 30,000 short turns, num_ctx 16", turns(30_000)),
    Case(f"turns-{N[0]}", "the same at max_messages: the window's cut", turns(N[0])),
    Case(
        "inputs-200000",
        "one-character inputs on /v1/embeddings and /api/embed",
        embeddings(200_000, ("/v1/embeddings", "/api/embed")),
    ),
    Case(
        f"inputs-{N[1]}",
        "the same at max_embedding_inputs, /api/embed",
        embeddings(N[1], ("/api/embed",)),
    ),
    Case(
        "schema-64KiB",
        "one tool of integer ranges at max_schema_bytes, tool_choice required",
        schema_tools(1),
    ),
    Case("schema-16x64KiB", "16 such tools, other bounds each", schema_tools(16)),
    Case(f"tools-{N[2]}", "small tools at max_tools, tool_choice required", many_tools),
    Case("tool-name-64KiB", "one tool whose name is nearly max_schema_bytes", tool_name),
    Case(
        "compaction",
        "/v1/responses/compact, a user turn and an earlier summary, repeated to 1 MiB",
        compaction,
    ),
    Case(f"stops-{MAX_STOPS + 1}", "stop strings, one over the bound", stops(MAX_STOPS + 1, 8)),
    Case(
        f"stops-{MAX_STOPS}x{MAX_STOP_CHARS}",
        "stop strings at both bounds, answered",
        stops(MAX_STOPS, MAX_STOP_CHARS),
    ),
    Case("stop-1MiB", "one stop string of a million characters", stops(1, 1 << 20)),
    Case("n-1000000", "n of a million on /v1/chat/completions", many_n),
    Case("batch-16MiB", "a /v1/files upload of one 16 MiB line of token ids", batch_line),
    Case(
        "num-gpu-storm",
        "20 /api/generate alternating num_gpu 1 and 2 (no GPU here)",
        num_gpu_storm,
        max_loads=0,
    ),
    Case("main-gpu", "main_gpu 3 on /api/generate", main_gpu, max_loads=0),
    Case("num-ctx-ladder", "/api/generate, num_ctx 4k to 32k by 4k", num_ctx_ladder, max_loads=3),
]
