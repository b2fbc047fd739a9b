"""No request is a 5xx (issue #45): hypothesis fuzzes the body and the headers of every face's
generating and embedding routes against a live daemon that wants an API key.

A case starts from a body the face answers, then overlays fields the faces read (or any name)
with any JSON value, huge integers and lone surrogates among them; sends it as UTF-8, UTF-16 or
UTF-32, as bytes that are no text, cut short, or with an integer literal, deep brackets or
nested tool-call arguments written into it; and adds headers (the key headers, the operator's,
Origin, X-Priority, ...) holding any bytes but line ends, UTF-8 and Latin-1 text that is not
ASCII among them. Most cases keep the right key, so that their bodies reach the handlers.

The seed is fixed, so CI fails only for a change; LOCALSERVE_TEST_FUZZ_SEED and
LOCALSERVE_TEST_FUZZ_CASES hunt further. The seed and the count of cases are written to the
terminal, whatever pytest captures. About a minute on 2 cores: every generation is capped at
CAP tokens (short_generations.py).
"""

from __future__ import annotations

import http.client
import json
import os
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import pytest
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st

from localserve.ground.settings import OPERATOR_HEADER
from localserve.server.http.bounded_json import MAX_DEPTH, MAX_INT_DIGITS
from tests.support import daemons
from tests.support.helpers import MODEL
from tests.support.live import running_daemon
from tests.support.short_generations import CAP, keep_short

SEED = int(os.environ.get("LOCALSERVE_TEST_FUZZ_SEED") or 45)
CASES = int(os.environ.get("LOCALSERVE_TEST_FUZZ_CASES") or 200)
KEY = "fuzz-key"
ARGS = ["--model", MODEL, "--parallel", "2", "--ctx", "512", "--api-key", KEY]

HI = [{"role": "user", "content": "Hi"}]
# A body each face answers 200, generating at most CAP tokens.
FACES: dict[str, dict[str, Any]] = {
    "/v1/chat/completions": {"model": MODEL, "messages": HI, "max_tokens": CAP},
    "/v1/completions": {"model": MODEL, "prompt": "Hi", "max_tokens": CAP},
    "/v1/responses": {"model": MODEL, "input": "Hi", "max_output_tokens": CAP},
    "/v1/embeddings": {"model": MODEL, "input": "Hi"},
    "/v1/messages": {"model": MODEL, "messages": HI, "max_tokens": CAP},
    "/api/chat": {"model": MODEL, "messages": HI, "stream": False},
    "/api/generate": {"model": MODEL, "prompt": "Hi", "stream": False},
}
# Fields the faces read, fuzzed more often than any other name.
FIELDS = (
    "model",
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
)
HEADERS = (
    "Authorization",
    "X-Api-Key",
    OPERATOR_HEADER,
    "Content-Type",
    "Origin",
    "X-Request-Id",
    "X-Priority",
    "Accept",
    "Anthropic-Version",
    "OpenAI-Beta",
    "Content-Encoding",
)


# -- what a case sends --------------------------------------------------------------------------


@dataclass
class Case:
    path: str
    body: bytes
    headers: dict[str, bytes]


ints = st.one_of(
    st.integers(),
    st.sampled_from([10**MAX_INT_DIGITS - 1, 10**MAX_INT_DIGITS, 10**400, -(10**400), 2**64]),
)
texts = st.one_of(
    st.text(max_size=40),
    st.text(st.characters() | st.characters(categories=["Cs"]), max_size=10),  # lone surrogates
    st.sampled_from(["", "\ud800", "\u2200", "json", "auto", "required", "none", "5m", "-1"]),
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


@st.composite
def bodies(draw: st.DrawFn, path: str) -> bytes:
    body = dict(FACES[path])
    body.update(draw(st.just({}) | st.dictionaries(st.sampled_from(FIELDS) | texts, values)))
    if draw(st.sampled_from([False] * 9 + [True])):
        body["messages"] = draw(nested_call)
    keep_short(path, body)
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
        text = text[:-1] + f', "{draw(st.sampled_from(FIELDS))}": {raw}' + "}"
    encoding = draw(st.sampled_from(["utf-8"] * 6 + ["utf-16", "utf-16-le", "utf-32", "latin-1"]))
    if encoding == "utf-16-le" and draw(st.booleans()):
        text = text.replace('"Hi"', '"\u2200"', 1)  # its bytes hold a quote's
    data = text.encode(encoding, "surrogatepass" if encoding.startswith("utf") else "replace")
    cut = draw(st.sampled_from(["whole"] * 8 + ["cut", "noise"]))
    if cut == "cut":
        return data[: draw(st.integers(0, max(0, len(data) - 1)))]
    if cut == "noise":
        return draw(st.binary(max_size=200))
    return data


# Any bytes a header may carry: none of CR, LF or NUL, which end it.
header_bytes = st.one_of(
    st.text(max_size=30).map(lambda t: t.encode("utf-8", "surrogatepass")),
    st.text(st.characters(max_codepoint=255), max_size=30).map(lambda t: t.encode("latin-1")),
    st.binary(max_size=30),
    st.sampled_from([b"Bearer " + KEY.encode(), KEY.encode(), b"application/json", b"gzip"]),
).map(lambda b: b.translate(None, b"\r\n\x00").strip(b" \t"))


@st.composite
def cases(draw: st.DrawFn) -> Case:
    path = draw(st.sampled_from(sorted(FACES)))
    headers = {"Content-Type": b"application/json", "Authorization": f"Bearer {KEY}".encode()}
    headers.update(draw(st.just({}) | st.dictionaries(st.sampled_from(HEADERS), header_bytes)))
    # A key that is not ASCII, where a key is compared.
    name = draw(st.sampled_from([None] * 3 + ["Authorization", "X-Api-Key", OPERATOR_HEADER]))
    if name is not None:
        headers[name] = draw(st.sampled_from(["Bearer clé", "ключ", "✓"])).encode()
    return Case(path, draw(bodies(path)), headers)


def send(url: str, case: Case) -> tuple[int, bytes]:
    parts = urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=60)
    try:
        conn.putrequest("POST", case.path, skip_accept_encoding=True)
        for name, value in case.headers.items():
            conn.putheader(name, value)
        conn.putheader("Content-Length", str(len(case.body)))
        conn.endheaders(case.body)
        response = conn.getresponse()
        return response.status, response.read()
    finally:
        conn.close()


# -- the tests ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def live() -> Iterator[str]:
    with running_daemon(ARGS) as (proc, url):
        yield url
        assert proc.poll() is None, daemons.log_text(proc.log_path)


SEEN: Counter[tuple[str, int]] = Counter()


@seed(SEED)
@settings(
    max_examples=CASES,
    deadline=None,
    database=None,
    print_blob=True,
    suppress_health_check=list(HealthCheck),
)
@given(case=cases())
def test_no_fuzzed_request_is_a_5xx(case: Case, live: str) -> None:
    status, answer = send(live, case)
    SEEN[(case.path, status)] += 1
    assert status < 500, (case, answer[:500])


def test_the_fuzzing_reached_every_face_and_the_daemon_survived(
    live: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """What the fuzzing above saw (so this runs after it, in the same module): its seed and its
    count of cases, written where CI shows them; a 200 from every face, so that the fuzzing got
    past the checks to the model; and a daemon that still answers."""
    cases_run = sum(SEEN.values())
    line = f"fuzz seed={SEED} cases={cases_run} answers: " + ", ".join(
        f"{path} {status}: {n}" for (path, status), n in sorted(SEEN.items())
    )
    with capsys.disabled():  # shown with or without -s
        print(f"\n{line}")
    assert cases_run >= CASES, line
    assert set(FACES) <= {path for path, status in SEEN if status == 200}, line
    assert daemons.health(live) is not None
