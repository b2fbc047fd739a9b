"""The daemon's listening socket, and the protocol each of its connections speaks first.

aiohttp's TCPSite hands every socket straight to a RequestHandler, which has no deadline for a
request's head and tells no one when bytes arrive. Here each socket's protocol is a `Front`:
as the socket opens it asks the connection table (connections.py) for room, so a connection
with none is answered 503 and closed before aiohttp sees it; at its first bytes it builds
aiohttp's own handler and from then on hands it every event, telling the table first when
bytes arrive. aiohttp parses and answers exactly as before; the front adds a call and a
comparison per read. A socket that never sends costs no aiohttp handler and no task: under
a flood of them (benchmarks/bench_abuse.py) that took the daemon's loop from about 43 % of a
core to 30 %.

Not a subclass of RequestHandler: what it knows of a connection (is a head in, is it idle)
is private and changes between releases, while the events a protocol receives are asyncio's
stable API. Busy and done come from a middleware (connections.py), which aiohttp calls.
"""

from __future__ import annotations

import asyncio
import logging
import sys

from aiohttp import web

from localserve.server.http.connections import Connections
from localserve.server.http.giving_way import Conn

log = logging.getLogger(__name__)

# Connections the kernel queues before we accept them (Linux caps it at net.core.somaxconn).
# Past it, the kernel drops a client's SYN and the client waits a second or more to retry:
# a flood of connections must not make a client wait behind it.
BACKLOG = 4096
# Descriptors besides the connections': model files, the workers' sockets and pipes, logs.
SPARE_FDS = 256


class Front(asyncio.Protocol):
    def __init__(self, server: web.Server, table: Connections) -> None:
        self._server = server
        self._table = table
        self._conn: Conn | None = None
        self._handler: web.RequestHandler | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)  # a TCP socket's
        self._conn = self._table.open(transport)

    def data_received(self, data: bytes) -> None:
        conn = self._conn
        if conn is None or not conn.alive:
            return
        if self._handler is None:
            # aiohttp's handler only once there is something to parse: a socket that never
            # sends costs the daemon no handler and no task, which a flood of them would.
            self._handler = self._server()
            self._handler.connection_made(conn.transport)
        self._table.heard(conn, data)
        self._handler.data_received(data)

    def eof_received(self) -> None:
        # aiohttp keeps no half-closed connection open: None closes the transport.
        if self._handler is not None:
            self._handler.eof_received()

    def connection_lost(self, exc: Exception | None) -> None:
        if self._conn is not None:
            self._table.lost(self._conn)
        if self._handler is not None:
            self._handler.connection_lost(exc)

    # The client reads slower than its answer is written, or reads again: the table times
    # how long an answer waits unread (connections.py, "Slow readers").
    def pause_writing(self) -> None:
        if self._conn is not None:
            self._table.writing(self._conn, paused=True)
        if self._handler is not None:
            self._handler.pause_writing()

    def resume_writing(self) -> None:
        if self._conn is not None:
            self._table.writing(self._conn, paused=False)
        if self._handler is not None:
            self._handler.resume_writing()


async def listen(
    server: web.Server, table: Connections, host: str, port: int
) -> asyncio.AbstractServer:
    """Listen on host:port, every connection through a `Front`; closing the returned server
    stops the listening (aiohttp's runner then closes the connections)."""
    settings = table.settings
    allow_descriptors(settings.max_connections + settings.operator_reserve + SPARE_FDS)
    loop = asyncio.get_running_loop()
    return await loop.create_server(lambda: Front(server, table), host, port, backlog=BACKLOG)


def allow_descriptors(wanted: int) -> None:
    """Raise this process's soft limit on open files toward `wanted`, within the hard limit, as
    Go's runtime does at every start: Linux's soft default, 1024, is below what the hard limit
    allows, and a daemon out of descriptors stops accepting anyone (asyncio retries a second
    later)."""
    if sys.platform == "win32":
        return
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY or soft >= wanted:
        return
    target = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
    if target > soft:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
        except (ValueError, OSError) as exc:
            log.warning("cannot raise the open-file limit to %d: %s", target, exc)
            return
    if target < wanted:
        log.warning(
            "open files are limited to %d (ulimit -n), fewer than max_connections and "
            "operator_reserve may hold",
            target,
        )
