"""Writing the Batch API's state so that a crash (`kill -9`, a power cut) leaves either the old
or the new version of a record, never half of one, and every appended line that was reported
done is on disk."""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")


def write_atomic(path: Path, data: bytes) -> None:
    """Write a temporary file beside `path`, sync it, then rename it over `path`: a reader (or
    a daemon restarted after a crash) sees the old content or the new, never a torn one."""
    tmp = path.with_name(f".{path.name}.tmp")
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def write_json(path: Path, value: Any) -> None:
    write_atomic(path, json.dumps(value, separators=(",", ":")).encode())


def read_json(path: Path) -> Any:
    """The JSON in `path`, or None when it is missing or unreadable (a record another version
    wrote badly is skipped, not fatal to the daemon's start)."""
    try:
        return json.loads(path.read_bytes())
    except (OSError, ValueError):
        return None


def read_records(paths: Iterable[Path], kind: Callable[..., T]) -> Iterator[T]:
    """The JSON records in `paths` made into `kind`s; one that is unreadable, or that another
    version wrote (fields it lacks or `kind` does not know), is left alone."""
    for path in paths:
        value = read_json(path)
        try:
            record = kind(**value)
        except TypeError:
            continue
        yield record


def append_line(path: Path, value: Any) -> None:
    """Append one JSON line and sync it: once this returns, a restart finds the line."""
    append_lines(path, [value])


def append_lines(path: Path, values: list[Any]) -> None:
    data = b"".join(json.dumps(v, separators=(",", ":")).encode() + b"\n" for v in values)
    with open(path, "ab") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())


def trim_torn_tail(path: Path) -> bytes:
    """The file's complete lines; a last line cut short by a crash mid-write is cut off the
    file too, so that the next append starts on a line of its own."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return b""
    end = data.rfind(b"\n") + 1
    if end < len(data):
        with open(path, "r+b") as f:
            f.truncate(end)
            f.flush()
            os.fsync(f.fileno())
    return data[:end]
