"""POST /v1/files: a multipart upload (`purpose` and `file`), streamed to disk within
`batch_file_size`, then checked line by line before it is kept. Nothing of a refused upload
stays.

The check parses every line, and `json.loads` holds the GIL for a whole line: in a thread, one
16 MiB line of token ids held the event loop 1.5 s. So it runs in a child process of its own
(LineChecker), which hands back only its verdict: the count, or the BadRequest naming the line.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from aiohttp import BodyPartReader, web
from aiohttp.http_exceptions import HttpProcessingError

from localserve.ground.errors import BadRequest
from localserve.ground.settings import Settings
from localserve.ground.units import format_size
from localserve.server.batches import line_child
from localserve.server.batches.files import BATCH, FileStore, StoredFile
from localserve.server.http.child import Child
from localserve.server.http.refused import Refused
from localserve.server.http.state import owned

CHUNK = 1 << 16
MAX_FIELD = 1024  # bytes of a form field other than the file (`purpose`)


class LineChecker(Child):
    """Uploaded files' lines checked in a child process of their own (server/http/child.py):
    the memory a large line took is given back when its check ends."""

    async def check(
        self, path: Path, max_lines: int, max_values: int
    ) -> tuple[int, frozenset[str]]:
        """What `check_file` returns (the requests, their urls), or the BadRequest it raises
        naming the first line that fails."""
        return await self.run(line_child.check, path, max_lines, max_values)


LINE_CHECKER = web.AppKey("batch_line_checker", LineChecker)


def install(app: web.Application) -> None:
    """The app's LineChecker, closed with the app."""
    owned(app, LINE_CHECKER, LineChecker(line_child.__name__))


async def upload(request: web.Request, files: FileStore, settings: Settings) -> StoredFile:
    limit = settings.batch_file_size
    if request.content_length is not None and request.content_length > limit + CHUNK:
        raise _too_large(limit)
    if not request.content_type.startswith("multipart/"):
        raise BadRequest("upload a file as multipart/form-data, with `file` and `purpose`", "file")
    files.room_for_one()
    staging = files.staging()
    try:
        try:
            purpose, filename = await _receive(request, staging, limit, settings.body_timeout)
        except asyncio.TimeoutError:
            raise Refused(
                408,
                f"the upload stalled for {settings.body_timeout:g} seconds (body_timeout)",
                "body_timeout",
            ) from None
        except (ValueError, AssertionError, LookupError, HttpProcessingError) as exc:
            # aiohttp's multipart reader on a body that is not the form it says it is.
            raise BadRequest(f"the multipart body cannot be read: {exc}", "file") from None
        if purpose != BATCH:
            given = "the form has no purpose" if purpose is None else f"purpose {purpose!r}"
            raise BadRequest(f"{given}: /v1/files takes batch inputs, purpose 'batch'", "purpose")
        if filename is None:
            raise BadRequest("the form has no `file` part", "file")
        checker = request.app[LINE_CHECKER]
        await checker.check(staging, settings.batch_lines, settings.max_json_values)
        files.room_for_one()  # another upload may have taken the last room meanwhile
        return files.add(staging, filename, BATCH)
    finally:
        staging.unlink(missing_ok=True)


async def _receive(
    request: web.Request, staging: Path, limit: int, timeout: float
) -> tuple[str | None, str | None]:
    """(purpose, the file's name) with the file's bytes written to `staging`. Each read waits
    at most `body_timeout` seconds: an upload may take long, but never stall."""
    reader = await request.multipart()
    purpose: str | None = None
    filename: str | None = None
    while True:
        part = await asyncio.wait_for(reader.next(), timeout)
        if part is None:
            return purpose, filename
        if not isinstance(part, BodyPartReader):
            raise BadRequest("nested multipart bodies are not taken", "file")
        if part.name == "purpose":
            raw = await asyncio.wait_for(part.read(), timeout)
            if len(raw) > MAX_FIELD:
                raise BadRequest("purpose is too long", "purpose")
            purpose = raw.decode(errors="replace").strip()
        elif part.name == "file":
            if filename is not None:
                raise BadRequest("the form has two `file` parts", "file")
            filename = _safe_name(part.filename)
            await _save(part, staging, limit, timeout)
        else:
            await asyncio.wait_for(part.release(), timeout)


async def _save(part: BodyPartReader, staging: Path, limit: int, timeout: float) -> None:
    size = 0
    with open(staging, "wb") as f:
        while True:
            chunk = await asyncio.wait_for(part.read_chunk(CHUNK), timeout)
            if not chunk:
                return
            size += len(chunk)
            if size > limit:
                raise _too_large(limit)
            f.write(chunk)


def _safe_name(name: str | None) -> str:
    """The file's name as it is shown again (a header on download): its last path part, in
    printable characters but quotes and backslashes."""
    name = (name or "").replace("\\", "/").rsplit("/", 1)[-1]
    kept = "".join(c if c.isprintable() and c not in '"\\' else "_" for c in name)
    return kept[:256] or "upload.jsonl"


def _too_large(limit: int) -> Refused:
    return Refused(
        413,
        f"the file is larger than {format_size(limit)}, the most /v1/files takes (batch_file_size)",
        "batch_file_size",
    )
