"""A request's log line is one line whatever its path holds: aiohttp percent-decodes the path,
so a client's `%0a` would otherwise start a line of the client's own making."""

from __future__ import annotations

import asyncio
import io
import logging

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from localserve.server.http.request_log import log, loggable, request_log_middleware

FORGED = "/x%0d%0a2026-01-01%20INFO%20localserve.requests%20request%20forged"


async def _log_of(raw_path: str) -> str:
    """The log the request middleware writes for one GET of `raw_path`, sent as it is."""
    out = io.StringIO()
    handler = logging.StreamHandler(out)
    log.addHandler(handler)
    log.setLevel(logging.INFO)
    server = TestServer(web.Application(middlewares=[request_log_middleware]))
    await server.start_server()
    try:
        reader, writer = await asyncio.open_connection(server.host, server.port)
        writer.write(f"GET {raw_path} HTTP/1.1\r\nHost: localhost\r\n\r\n".encode())
        await reader.readuntil(b"\r\n\r\n")
        writer.close()
        await writer.wait_closed()
    finally:
        await server.close()
        log.removeHandler(handler)
    return out.getvalue()


@pytest.fixture(autouse=True)
def _restore_level():
    level = log.level
    yield
    log.setLevel(level)


def test_a_path_with_a_newline_is_logged_on_one_line() -> None:
    lines = asyncio.run(_log_of(FORGED)).splitlines()
    assert len(lines) == 1
    assert "/x\\x0d\\x0a2026-01-01\\x20INFO" in lines[0]


@pytest.mark.parametrize(
    ("path", "logged"),
    [
        ("/api/generate", "/api/generate"),
        ("/x\ny", "/x\\x0ay"),
        ("/x\ry", "/x\\x0dy"),
        ("/x y", "/x\\x20y"),
        ("/x\\x0ay", "/x\\\\x0ay"),
        ("/x\u2028y", "/x\\u2028y"),
        ("/x\x1b[31my", "/x\\x1b[31my"),
        ("/caf\u00e9", "/caf\u00e9"),
        ("/x\udcffy", "/x\\udcffy"),
    ],
)
def test_a_logged_path_escapes_what_could_end_its_line_or_field(path: str, logged: str) -> None:
    assert loggable(path) == logged
