"""A batch's input lines as OpenAI's Batch API writes them, one JSON object a line:

    {"custom_id": "q1", "method": "POST", "url": "/v1/chat/completions", "body": {...}}

Checked whole when a file is uploaded (a file that would fail half-way is refused at once, with
the line it fails on), and its url against the batch's endpoint when a batch is created. Also
where a job resumes: the custom_ids its output and error files already hold. No I/O here but
iterating what the caller opened.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from localserve.ground.errors import BadRequest
from localserve.server.http import bounded_json

ENDPOINTS = ("/v1/chat/completions", "/v1/completions", "/v1/embeddings")
# OpenAI's one completion window; a batch not finished within it expires.
WINDOWS = {"24h": 24 * 3600}
MAX_CUSTOM_ID = 512  # characters; an id is echoed on every output line
FILE_PARAM = "file"


@dataclass(frozen=True)
class Line:
    number: int  # 1-based, as an editor shows it, for the errors that name it
    custom_id: str
    url: str
    body: dict[str, Any]


def parse_line(raw: bytes, number: int, max_values: int | None = None) -> Line | None:
    """One line of an input file, or None for a blank one; BadRequest names the line and what
    is wrong with it (`max_values`: the body bound its request will meet when it runs)."""
    if not raw.strip():
        return None
    try:
        value = bounded_json.loads(raw, max_values)
    except bounded_json.BadJSON as exc:
        raise _bad(number, str(exc)) from None
    if not isinstance(value, dict):
        raise _bad(number, "must be a JSON object")
    custom_id = value.get("custom_id")
    if not isinstance(custom_id, str) or not custom_id:
        raise _bad(number, "needs a custom_id: a non-empty string")
    if len(custom_id) > MAX_CUSTOM_ID:
        raise _bad(number, f"has a custom_id longer than {MAX_CUSTOM_ID} characters")
    if value.get("method") != "POST":
        raise _bad(number, 'needs "method": "POST"')
    url = value.get("url")
    if url not in ENDPOINTS:
        raise _bad(number, f"has url {url!r}; a batch runs one of {', '.join(ENDPOINTS)}")
    body = value.get("body")
    if not isinstance(body, dict):
        raise _bad(number, "needs a body: the request's JSON object")
    if body.get("stream"):
        raise _bad(number, "asks to stream; a batch's answers are collected, not streamed")
    return Line(number, custom_id, url, body)


def read_lines(raws: Iterable[bytes], max_values: int | None = None) -> Iterator[Line]:
    """The lines of an input file (its raw lines, newlines kept or not), blank ones skipped."""
    for number, raw in enumerate(raws, start=1):
        line = parse_line(raw, number, max_values)
        if line is not None:
            yield line


def check_file(
    raws: Iterable[bytes], max_lines: int, max_values: int | None = None
) -> tuple[int, frozenset[str]]:
    """Every line checked, no custom_id twice, at most `max_lines` requests: (the count, the
    urls they use). BadRequest on the first line that fails."""
    seen: set[str] = set()
    urls: set[str] = set()
    for line in read_lines(raws, max_values):
        if line.custom_id in seen:
            raise _bad(line.number, f"repeats custom_id {line.custom_id!r}; each must be unique")
        seen.add(line.custom_id)
        urls.add(line.url)
        if len(seen) > max_lines:
            raise BadRequest(
                f"the file holds more than {max_lines} requests, the most a batch takes "
                "(batch_lines)",
                FILE_PARAM,
            )
    if not seen:
        raise BadRequest("the file holds no requests", FILE_PARAM)
    return len(seen), frozenset(urls)


def check_endpoint(urls: Iterable[str], endpoint: str) -> None:
    """A batch runs one endpoint: every line's url must be it."""
    if endpoint not in ENDPOINTS:
        raise BadRequest(
            f"endpoint {endpoint!r} is not one a batch runs: {', '.join(ENDPOINTS)}", "endpoint"
        )
    others = sorted(set(urls) - {endpoint})
    if others:
        raise BadRequest(
            f"the input file has requests for {', '.join(others)}, not the batch's endpoint "
            f"{endpoint}",
            "input_file_id",
        )


def window_seconds(window: object) -> int:
    if not isinstance(window, str) or window not in WINDOWS:
        raise BadRequest(
            f"completion_window must be one of {', '.join(WINDOWS)}", "completion_window"
        )
    return WINDOWS[window]


def done_ids(data: bytes) -> set[str]:
    """The custom_ids that output or error lines already hold: the lines a resumed job skips.
    Only whole lines count (disk.trim_torn_tail cut any half-written last one)."""
    done: set[str] = set()
    for raw in data.splitlines():
        try:
            value = json.loads(raw)
        except ValueError:
            continue  # a line we did not write whole is as good as not written
        if isinstance(value, dict) and isinstance(value.get("custom_id"), str):
            done.add(value["custom_id"])
    return done


def check_metadata(value: object) -> dict[str, str] | None:
    """OpenAI's metadata: at most 16 string pairs, keys to 64 characters, values to 512."""
    if value is None:
        return None
    if (
        not isinstance(value, dict)
        or len(value) > 16
        or not all(isinstance(k, str) and len(k) <= 64 for k in value)
        or not all(isinstance(v, str) and len(v) <= 512 for v in value.values())
    ):
        raise BadRequest(
            "metadata must be an object of at most 16 strings (keys to 64 characters, values "
            "to 512)",
            "metadata",
        )
    return dict(value)


def _bad(number: int, what: str) -> BadRequest:
    return BadRequest(f"line {number} of the file {what}", FILE_PARAM)
