"""A request whose client left (or was given up by the connection table) ends quietly: aiohttp
logs a handler's ConnectionResetError as an error with its traceback, which, a few ms each,
took a third of the event loop under bench_abuse's bodies attack (#57)."""

from __future__ import annotations

import asyncio
import gc
import logging
from types import SimpleNamespace

import aiohttp
import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from localserve.ground.settings import Settings
from localserve.server.app import build_app


async def cut_off_body(client: TestClient) -> None:
    """A request whose client leaves while its handler waits for the rest of the body."""
    _, writer = await asyncio.open_connection(client.host, client.port)
    writer.write(
        b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        b"Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n{"
    )
    await writer.drain()
    await asyncio.sleep(0.2)  # the handler now waits for the rest of the body
    writer.transport.abort()
    await asyncio.sleep(0.2)


def test_a_body_cut_off_mid_read_logs_no_error(caplog: pytest.LogCaptureFixture) -> None:
    async def go() -> None:
        app = build_app(SimpleNamespace(settings=Settings()))  # type: ignore[arg-type]
        async with TestClient(TestServer(app)) as client:
            await cut_off_body(client)
            async with client.post("/v1/chat/completions", data=b"[") as r:  # and serves on
                assert r.status == 400

    with caplog.at_level(logging.DEBUG):
        asyncio.run(go())
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert not errors, [r.getMessage() for r in errors]


def test_a_body_cut_off_mid_read_leaves_no_frames_for_the_collector() -> None:
    # aiohttp's reader keeps the error it raised; with its traceback, the frames that hold the
    # reader stayed in a cycle until a full collection.
    async def go() -> list[BaseException]:
        app = build_app(SimpleNamespace(settings=Settings()))  # type: ignore[arg-type]
        async with TestClient(TestServer(app)) as client:
            await cut_off_body(client)
            return [
                o
                for o in gc.get_objects()
                if isinstance(o, ConnectionResetError) and o.__traceback__ is not None
            ]

    gc.collect()
    gc.disable()
    try:
        assert asyncio.run(go()) == []
    finally:
        gc.enable()


def test_a_reset_while_the_client_is_still_there_is_not_hidden() -> None:
    async def broken(request: web.Request) -> web.Response:
        raise ConnectionResetError("an upstream's socket, say")

    async def go() -> int:
        manager = SimpleNamespace(settings=Settings())
        app = build_app(manager)  # type: ignore[arg-type]
        app.router.add_get("/broken", broken)
        async with TestClient(TestServer(app)) as client:
            try:
                async with client.get("/broken") as r:
                    return r.status
            except aiohttp.ClientError:
                return 0

    assert asyncio.run(go()) == 500
