"""What one fuzzed request sends (a Case), and hypothesis' strategy for the cases of a route.

A case starts from the route's base request (fuzz_routes.py), then overlays fields the faces
read, or the route documents, or any name, with any JSON value, huge integers and lone
surrogates among them; sends it as UTF-8, UTF-16 or UTF-32, as bytes that are no text, cut
short, or with an integer literal, deep brackets or nested tool-call arguments written into
it. A route that reads no body gets a fuzzed path parameter or query string (and now and then
a body all the same); the upload gets a fuzzed form. Headers (the key headers, the
operator's, Origin, X-Priority, ...) hold any bytes but line ends, UTF-8 and Latin-1 text that
is not ASCII among them. Most cases keep the right key, so that their bodies reach handlers.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

from hypothesis import strategies as st

from localserve.ground.settings import OPERATOR_HEADER
from localserve.server.http.bounded_json import MAX_DEPTH, MAX_INT_DIGITS
from tests.support.fuzz_routes import (
    BATCH_LINE,
    HI,
    KEYLESS,
    SETUP_ID,
    Route,
    base_of,
    documented_fields,
    documented_query,
    steer,
)

KEY = "fuzz-key"
KEY_HEADERS = ("Authorization", "X-Api-Key", OPERATOR_HEADER)
BOUNDARY = "fuzz-boundary"
# Fields the faces read, fuzzed more often than any other name.
FIELDS = (
    "model",
    "name",
    "messages",
    "prompt",
    "input",
    "system",
    "instructions",
    "stream",
    "stream_options",
    "tools",
    "tool_choice",
    "response_format",
    "format",
    "options",
    "keep_alive",
    "seed",
    "temperature",
    "top_p",
    "top_k",
    "stop",
    "logit_bias",
    "logprobs",
    "n",
    "echo",
    "suffix",
    "think",
    "thinking",
    "reasoning",
    "reasoning_effort",
    "priority",
    "speculative",
    "metadata",
    "encoding_format",
    "dimensions",
    "truncate",
    "raw",
    "template",
    "images",
    "path",
    "input_file_id",
    "endpoint",
)
HEADERS = (
    *KEY_HEADERS,
    "Content-Type",
    "Origin",
    "X-Request-Id",
    "X-Priority",
    "Accept",
    "Anthropic-Version",
    "OpenAI-Beta",
    "Content-Encoding",
)


@dataclass
class Case:
    route: Route
    target: str  # the path with its parameters filled, and any query string
    body: bytes
    headers: dict[str, bytes] = field(default_factory=dict)
    setup: str | None = None  # see fuzz_routes.Base

    def __repr__(self) -> str:
        """Short enough for a failure's report: a body of megabytes is shown by its ends."""
        body = self.body if len(self.body) <= 600 else self.body[:300] + b"..." + self.body[-200:]
        target = self.target if len(self.target) <= 300 else f"{self.target[:300]}..."
        headers = {k: v if len(v) <= 200 else v[:200] + b"..." for k, v in self.headers.items()}
        return (
            f"Case({self.route.method} {target!r}, setup={self.setup}, {len(self.body)} bytes: "
            f"{body!r}, headers={headers!r})"
        )


def headers_for(route: Route) -> dict[str, bytes]:
    """The right key (none for a keyless route) and the content type."""
    kind = base_of(route).kind
    content = f"multipart/form-data; boundary={BOUNDARY}" if kind == "form" else "application/json"
    headers = {"Content-Type": content.encode()}
    if route not in KEYLESS:
        headers["Authorization"] = f"Bearer {KEY}".encode()
    return headers


def _quoted(text: str, safe: str = "/") -> str:
    return quote(text.encode("utf-8", "surrogatepass"), safe)


def fill(route: Route, params: dict[str, str], query: str = "") -> str:
    path = route.path
    for name, value in params.items():
        path = path.replace("{" + name + "}", _quoted(value, ""))
    return f"{path}?{query}" if query else path


def form(fields: dict[str, Any], file: bytes, filename: str = "in.jsonl") -> bytes:
    """A multipart/form-data body of `fields` and one `file` part."""
    parts = [
        f'--{BOUNDARY}\r\nContent-Disposition: form-data; name="{name}"\r\n\r\n{value}\r\n'.encode(
            "utf-8", "surrogatepass"
        )
        for name, value in fields.items()
    ]
    head = (
        f'--{BOUNDARY}\r\nContent-Disposition: form-data; name="file"; filename="{filename}"'
        "\r\nContent-Type: application/jsonl\r\n\r\n"
    )
    parts.append(head.encode("utf-8", "surrogatepass") + file + b"\r\n")
    return b"".join(parts) + f"--{BOUNDARY}--\r\n".encode()


def batch_file(lines: int = 1) -> bytes:
    return (json.dumps(BATCH_LINE) + "\n").encode() * lines


# -- values --------------------------------------------------------------------------------------

ints = st.one_of(
    st.integers(),
    st.sampled_from([10**MAX_INT_DIGITS - 1, 10**MAX_INT_DIGITS, 10**400, -(10**400), 2**64]),
)
texts = st.one_of(
    st.text(max_size=40),
    st.text(st.characters() | st.characters(categories=["Cs"]), max_size=10),  # lone surrogates
    st.sampled_from(
        ["", "\ud800", "\u2200", "json", "auto", "required", "none", "5m", "-1", SETUP_ID]
    ),
)
scalars = st.one_of(st.none(), st.booleans(), ints, st.floats(), texts)
values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.sampled_from(FIELDS) | texts, inner)
    ),
    max_leaves=12,
)
# A past tool call, its arguments a JSON text nested to any depth.
nested_call = st.integers(1, 3000).map(
    lambda n: [
        *HI,
        {
            "role": "assistant",
            "tool_calls": [{"id": "c", "function": {"name": "f", "arguments": "[" * n + "]" * n}}],
        },
    ]
)
# Any bytes a header may carry: none of CR, LF or NUL, which end it.
header_bytes = st.one_of(
    st.text(max_size=30).map(lambda t: t.encode("utf-8", "surrogatepass")),
    st.text(st.characters(max_codepoint=255), max_size=30).map(lambda t: t.encode("latin-1")),
    st.binary(max_size=30),
    st.sampled_from([b"Bearer " + KEY.encode(), KEY.encode(), b"application/json", b"gzip"]),
).map(lambda b: b.translate(None, b"\r\n\x00").strip(b" \t"))


# -- bodies --------------------------------------------------------------------------------------


@st.composite
def json_bodies(draw: st.DrawFn, route: Route) -> bytes:
    base = base_of(route).body
    body = dict(base or {})
    names = st.sampled_from(FIELDS + documented_fields(route)) | texts
    body.update(draw(st.just({}) | st.dictionaries(names, values)))
    if "messages" in body and draw(st.sampled_from([False] * 9 + [True])):
        body["messages"] = draw(nested_call)
    steer(route, body)
    text = json.dumps(body, ensure_ascii=draw(st.booleans()))
    # Written into the text, where json.dumps cannot: a long literal, deep brackets.
    raw = draw(
        st.sampled_from(
            [
                None,
                None,
                None,
                "7" * draw(st.sampled_from([MAX_INT_DIGITS, MAX_INT_DIGITS + 1, 400, 5000])),
                "[" * (n := draw(st.sampled_from([MAX_DEPTH, MAX_DEPTH + 1, 5000]))) + "]" * n,
            ]
        )
    )
    if raw is not None:
        text = text[:-1] + (", " if body else "") + f'"{draw(names)}": {raw}' + "}"
    encoding = draw(st.sampled_from(["utf-8"] * 6 + ["utf-16", "utf-16-le", "utf-32", "latin-1"]))
    if encoding == "utf-16-le" and draw(st.booleans()):
        text = text.replace('"Hi"', '"\u2200"', 1)  # its bytes hold a quote's
    data = text.encode(encoding, "surrogatepass" if encoding.startswith("utf") else "replace")
    return draw(spoiled(data))


@st.composite
def spoiled(draw: st.DrawFn, data: bytes) -> bytes:
    """Mostly `data` whole; else cut short, or noise in its place."""
    cut = draw(st.sampled_from(["whole"] * 8 + ["cut", "noise"]))
    if cut == "cut":
        return data[: draw(st.integers(0, max(0, len(data) - 1)))]
    if cut == "noise":
        return draw(st.binary(max_size=200))
    return data


@st.composite
def form_bodies(draw: st.DrawFn, route: Route) -> bytes:
    """An upload: a purpose, a file name and lines, each of them fuzzed now and then."""
    fields = dict(base_of(route).body or {})
    fields.update(draw(st.just({}) | st.dictionaries(st.sampled_from(["purpose"]) | texts, texts)))
    line = dict(BATCH_LINE)
    line.update(draw(st.just({}) | st.dictionaries(st.sampled_from(list(BATCH_LINE)), values)))
    lines = [json.dumps(line, ensure_ascii=draw(st.booleans()))] * draw(st.integers(0, 3))
    lines += draw(st.lists(st.text(max_size=40) | values.map(json.dumps), max_size=2))
    file = "\n".join(lines).encode("utf-8", "surrogatepass")
    data = form(fields, file, draw(st.just("in.jsonl") | texts))
    return draw(spoiled(data))


@st.composite
def bare_bodies(draw: st.DrawFn, route: Route) -> bytes:
    """Mostly none; else some JSON or noise, which the route does not read."""
    kind = draw(st.sampled_from(["none"] * 6 + ["json", "noise"]))
    if kind == "json":
        return json.dumps(draw(values)).encode("utf-8", "surrogatepass")
    return draw(st.binary(max_size=200)) if kind == "noise" else b""


@st.composite
def targets(draw: st.DrawFn, route: Route) -> str:
    """The path with its parameters (the base's, or fuzzed), and now and then a query."""
    params = dict(base_of(route).params)
    for name in params:
        if draw(st.booleans()):
            params[name] = draw(texts)
    query = ""
    if draw(st.sampled_from([False] * 3 + [True])):
        names = st.sampled_from(documented_query(route) + ("limit", "after", "stream")) | texts
        pairs = draw(st.lists(st.tuples(names, texts | ints.map(str)), max_size=4))
        query = "&".join(f"{_quoted(k)}={_quoted(v)}" for k, v in pairs)
    return fill(route, params, query)


@st.composite
def cases(draw: st.DrawFn, route: Route) -> Case:
    base = base_of(route)
    headers = headers_for(route)
    headers.update(draw(st.just({}) | st.dictionaries(st.sampled_from(HEADERS), header_bytes)))
    # A key that is not ASCII, where a key is compared.
    name = draw(st.sampled_from([None] * 3 + list(KEY_HEADERS)))
    if name is not None:
        headers[name] = draw(st.sampled_from(["Bearer clé", "ключ", "✓"])).encode()
    if route in KEYLESS:
        for key in ("Authorization", "X-Api-Key"):
            if headers.get(key, b"").endswith(KEY.encode()):
                headers[key] = b"Bearer not-the-key"
    bodies = {"json": json_bodies, "form": form_bodies, "bare": bare_bodies}[base.kind]
    return Case(route, draw(targets(route)), draw(bodies(route)), headers, base.setup)
