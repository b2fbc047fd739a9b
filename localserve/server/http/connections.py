"""The daemon's connections: how many a client may hold, how long a request's head may take to
arrive, how long a connection may sit idle, and the room kept for this user's CLI and tray.

aiohttp bounds none of these: it takes every connection it is given, has no timeout on a
request's head and keeps an idle connection for an hour (`keepalive_timeout`, 3630 s).

The design rests on one fact: a connection with no request in flight holds nothing of value,
and HTTP lets a server close it at any time (clients open another).
- **States.** Each connection (a `Conn`, kept by its transport) is *waiting* (between requests,
  nothing of the next one heard), *heading* (the next head has begun; a new connection is
  heading from its start, as Go's ReadHeaderTimeout runs from it) or *busy* (its head is in,
  until its handler ends). front.py, the protocol in front of aiohttp's, hands the table the
  bytes as they arrive: a waiting connection turns heading at the first byte of its next
  head, and busy at the blank line that ends it (not a turn or two later, when aiohttp starts
  the handler: a burst of new connections in between could close it as idle);
  `connections_middleware` marks it busy too, and waiting again when its handler returns.
- **Stalled bodies.** A busy connection whose body is still arriving, after STALL_GRACE_S,
  slower than MIN_BODY_RATE, is *stalled*: no client sends a body so slowly but one that
  means to hold the slot (a few hundred such from 127.0.0.1 once locked every local client
  out). It gives way to a new connection, the slowest first, with a 408.
- **Timeouts.** A heading connection whose head is not in within `header_timeout` is closed,
  after a 408 if it sent anything (one that sent nothing gets no answer, as from Go's server);
  a waiting one is closed after `idle_timeout`, unless an answer is still leaving at the pace
  its client reads. A busy one has no timeout here: its body has `body_timeout` (limits.py).
- **Room.** A new connection takes a slot when its client address (an IPv6 /64, which one
  machine holds whole) has fewer than `max_connections_per_address` and the daemon fewer than
  `max_connections`. Otherwise the connection of that address, or of the daemon, that has
  made the least progress is closed to make room: the oldest heading one, else the slowest
  stalled one, else the oldest waiting one (last: its client may be sending its next request
  down it as it closes, which the client sees as a reset; bench_abuse lost a third of its
  requests so while stalled bodies outlasted them). So idle and trickling sockets, however
  many and from however many addresses, never keep a client out: only requests really in
  flight fill the slots. Loopback has no per-address cap: every local client, the editor and
  an attacker alike, is 127.0.0.1, so a cap there could only refuse the editor.
- **Never one whose head is on its way.** An attacker who reopens its sockets brings a burst
  of new ones each time the loop wakes, and those connections' `connection_made` run before
  the loop reads what arrived in the same turn: a client's connection, its head already in
  the kernel, could be the oldest idle one and be closed unread (the first run of
  benchmarks/bench_abuse.py lost half its requests so). So a connection with bytes waiting
  unread on its socket (FIONREAD; Windows cannot say) does not give way, nor one still
  sending an answer.
- **The reserve.** When every slot has a request in flight, a new connection takes one of
  `operator_reserve` more, on which only requests with the operator token (guard.py) are
  served: this user's CLI and tray. Any other request there is a 503, and its connection
  closes. The reserve is checked at the request because it can be checked nowhere sooner:
  on a loopback daemon every client, an attacker too, connects from 127.0.0.1, and a socket
  tells nothing of who opened it before its head is in. The reserve's own idle connections
  give way to new ones in the same way.

What was closed under pressure, and why, is logged as one summary line at most every REPORT_S
seconds (a line per socket would let an attack flood the log); routine closes at DEBUG.
"""

from __future__ import annotations

import asyncio
import enum
import itertools
import json
import logging
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from localserve.ground.settings import Settings
from localserve.server.http.errors import RETRY_AFTER_S, Refused
from localserve.server.http.guard import GUARD, Handler
from localserve.server.http.peers import client_group, loopback, unread

log = logging.getLogger(__name__)

REPORT_S = 10.0
_END_OF_HEAD = b"\r\n\r\n"

# A body slower than this, this long after its head, is stalled (bytes a second, seconds).
# Clients write a body right behind its head; a grace of a second let an attack that reopens
# its sockets every second keep hundreds inside it, so only waiting keep-alive connections,
# about to carry a client's next request, were left to give way (bench_abuse lost requests).
MIN_BODY_RATE = 1024.0
STALL_GRACE_S = 0.25

_BUSY = (
    b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\n"
    b"Retry-After: " + RETRY_AFTER_S.encode() + b"\r\n"
    b"Connection: close\r\nContent-Length: %d\r\n\r\n%s"
)
_TIMEOUT = (
    b"HTTP/1.1 408 Request Timeout\r\nContent-Type: application/json\r\n"
    b"Connection: close\r\nContent-Length: %d\r\n\r\n%s"
)
_SLOW_BODY = json.dumps(
    {"error": "the request body arrived too slowly and gave way to a new connection"}
).encode()
_STALLED = _TIMEOUT % (len(_SLOW_BODY), _SLOW_BODY)
# Why connections were closed or refused, as the summary line words them. Only what happens
# under pressure or to a stalled client is summed up: a keep-alive connection left idle, or
# one a browser opened ahead and never used, closes every day (logged at DEBUG).
_REASONS = {
    "evicted": "idle closed to make room",
    "stalled": "stalled bodies closed to make room",
    "header_timeout": "heads not in within header_timeout",
    "refused": "refused with every connection busy",
    "reserve": "requests refused on the operator's reserve",
}


class State(enum.Enum):
    WAITING = "waiting"
    HEADING = "heading"
    BUSY = "busy"


@dataclass(eq=False)
class Conn:
    transport: asyncio.Transport
    group: str  # the client address whose share it counts in
    reserved: bool  # in the operator's reserve
    since: int  # when it entered its state, as a ticket: the oldest has the lowest
    state: State = State.HEADING
    heard: bool = False  # bytes of the current head have arrived
    tail: bytes = b""  # the current head's last bytes so far, to find its end across reads
    handled: bool = False  # a handler runs for it (the middleware says)
    body: Any = None  # the request's body stream while its handler runs (aiohttp's reader)
    body_from: float = 0.0  # when the head ended (the loop's clock)
    body_bytes: int = 0  # what arrived since
    pending: int = 0  # output still unsent at the last idle check
    timer: asyncio.TimerHandle | None = None
    alive: bool = True

    @property
    def idle(self) -> bool:
        return self.alive and self.state is not State.BUSY

    def body_rate(self, now: float) -> float | None:
        """Bytes a second of a body still arriving past the grace; None if it is no such."""
        waited = now - self.body_from
        if not self.alive or self.body is None or self.body.is_eof() or waited < STALL_GRACE_S:
            return None
        return self.body_bytes / waited


class Connections:
    """Every open connection of the daemon, with the rules above."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self._conns: dict[asyncio.BaseTransport, Conn] = {}
        self._groups: dict[str, set[Conn]] = {}  # the ordinary connections of each address
        self._reserve: set[Conn] = set()
        self._tally: Counter[str] = Counter()
        self._report: asyncio.TimerHandle | None = None
        self._tickets = itertools.count()

    def __len__(self) -> int:
        return len(self._conns)

    def get(self, transport: asyncio.BaseTransport | None) -> Conn | None:
        return self._conns.get(transport) if transport is not None else None

    # -- what front.py and the middleware tell it ---------------------------------------------

    def open(self, transport: asyncio.Transport) -> Conn | None:
        """The new connection's record, with room made for it; None when there is none (it
        has been answered 503 and closed)."""
        group = client_group(transport.get_extra_info("peername"))
        reserved = not self._make_room(group)
        if reserved and not self._make_reserve_room():
            body = json.dumps(
                {
                    "error": "every connection has a request in flight (max_connections "
                    f"{self.settings.max_connections}); try again shortly"
                }
            ).encode()
            transport.write(_BUSY % (len(body), body))
            transport.close()
            self._count("refused")
            return None
        conn = Conn(transport, group, reserved, next(self._tickets))
        self._conns[transport] = conn
        if reserved:
            self._reserve.add(conn)
        else:
            self._groups.setdefault(group, set()).add(conn)
        self._arm(conn, self.settings.header_timeout)
        return conn

    def heard(self, conn: Conn, data: bytes) -> None:
        """Bytes arrived: a waiting connection's next head has begun, or a head has ended."""
        if not conn.alive:
            return
        if conn.state is State.BUSY:
            conn.body_bytes += len(data)
            return
        if conn.state is State.WAITING:
            conn.state, conn.since = State.HEADING, next(self._tickets)
            self._arm(conn, self.settings.header_timeout)
        conn.heard = True
        if _END_OF_HEAD in data or _END_OF_HEAD in conn.tail + data[:3]:
            # Busy, but the head's deadline stays until a handler starts: the blank line may
            # be a body's that aiohttp reads past (a request it answered without reading it),
            # and no handler will ever mark this connection waiting again.
            conn.state, conn.heard, conn.tail = State.BUSY, False, b""
            conn.body_from = asyncio.get_running_loop().time()
            conn.body_bytes = len(data) - (data.find(_END_OF_HEAD) + len(_END_OF_HEAD))
        else:
            conn.tail = (conn.tail + data[-3:])[-3:]

    def started(self, conn: Conn, body: Any = None) -> None:
        """A request's handler starts; `body` is its stream, if the request has a body."""
        conn.state, conn.heard, conn.tail, conn.handled = State.BUSY, False, b"", True
        conn.body = body
        if not conn.body_from:  # its head's end was not seen (a test's client)
            conn.body_from = asyncio.get_running_loop().time()
        self._arm(conn, 0)

    def finished(self, conn: Conn) -> None:
        """Its handler has returned: the connection waits for the next request."""
        conn.handled, conn.body, conn.body_from = False, None, 0.0
        if not conn.alive:
            return
        conn.state, conn.since, conn.pending = State.WAITING, next(self._tickets), 0
        self._arm(conn, self.settings.idle_timeout)

    def lost(self, conn: Conn) -> None:
        self._drop(conn)

    def refused_on_reserve(self) -> None:
        self._count("reserve")

    # -- room ----------------------------------------------------------------------------------

    def _make_room(self, group: str) -> bool:
        """Whether an ordinary slot is free for a connection from `group`, once the oldest
        idle connection in the way (if any) is closed."""
        settings = self.settings
        share = self._groups.get(group, set())
        cap = 0 if loopback(group) else settings.max_connections_per_address
        if cap and len(share) >= cap and not self._evict(share):
            return False
        if len(self._conns) - len(self._reserve) < settings.max_connections:
            return True
        return self._evict(c for c in self._conns.values() if not c.reserved)

    def _make_reserve_room(self) -> bool:
        if len(self._reserve) < self.settings.operator_reserve:
            return True
        return self._evict(self._reserve)

    def _evict(self, members: Iterable[Conn]) -> bool:
        """Close the connection of `members` that has made the least progress and may give
        way: the oldest heading, else the slowest stalled, else the oldest waiting (a client
        may be sending its next request down it as it closes); False if none may."""
        members = [c for c in members if c.alive]
        now = asyncio.get_running_loop().time()
        rates = [(rate, c) for c in members if (rate := c.body_rate(now)) is not None]
        by_age = sorted((c for c in members if c.idle), key=lambda c: c.since)
        order = [c for c in by_age if c.state is State.HEADING]
        order += [c for rate, c in sorted(rates, key=lambda rc: rc[0]) if rate < MIN_BODY_RATE]
        order += [c for c in by_age if c.state is State.WAITING]
        for victim in order:
            transport = victim.transport
            if transport.get_write_buffer_size() or unread(transport):
                continue
            if victim.idle:
                self._close(victim, "evicted")
            else:
                self._close(victim, "stalled", _STALLED)
            return True
        return False

    # -- timeouts ------------------------------------------------------------------------------

    def _arm(self, conn: Conn, seconds: float) -> None:
        if conn.timer is not None:
            conn.timer.cancel()
            conn.timer = None
        if seconds > 0:
            conn.timer = asyncio.get_running_loop().call_later(seconds, self._expire, conn)

    def _expire(self, conn: Conn) -> None:
        conn.timer = None
        if conn.state is State.BUSY:  # its head seemed in, yet no handler came
            self._close(conn, "no request within header_timeout")
        elif conn.state is State.HEADING and not conn.heard:
            self._close(conn, "nothing sent within header_timeout")
        elif conn.state is State.HEADING:
            body = json.dumps(
                {
                    "error": "the request's head did not arrive within "
                    f"{self.settings.header_timeout:g} seconds (header_timeout)"
                }
            ).encode()
            self._close(conn, "header_timeout", _TIMEOUT % (len(body), body))
        elif conn.state is State.WAITING:
            pending = conn.transport.get_write_buffer_size()
            if pending and pending != conn.pending:  # an answer still leaving as it is read
                conn.pending = pending
                self._arm(conn, self.settings.idle_timeout)
                return
            self._close(conn, "idle past idle_timeout")

    # -- closing -------------------------------------------------------------------------------

    def _close(self, conn: Conn, reason: str, answer: bytes | None = None) -> None:
        self._drop(conn)
        transport = conn.transport
        if answer is not None and not transport.get_write_buffer_size():
            transport.write(answer)
        # Output still unsent belongs to a client that stopped reading: a close would wait
        # for it for ever, holding the socket outside the table.
        if transport.get_write_buffer_size():
            transport.abort()
        else:
            transport.close()
        self._count(reason)

    def _drop(self, conn: Conn) -> None:
        if not conn.alive:
            return
        conn.alive = False
        self._arm(conn, 0)
        self._conns.pop(conn.transport, None)
        if conn.reserved:
            self._reserve.discard(conn)
            return
        share = self._groups.get(conn.group)
        if share is not None:
            share.discard(conn)
            if not share:
                del self._groups[conn.group]

    def _count(self, reason: str) -> None:
        if reason not in _REASONS:
            log.debug("closed a connection: %s", reason)
            return
        self._tally[reason] += 1
        if self._report is None:
            self._report = asyncio.get_running_loop().call_later(REPORT_S, self._log_tally)

    def _log_tally(self) -> None:
        self._report = None
        counts = ", ".join(f"{n} {_REASONS[r]}" for r, n in sorted(self._tally.items()))
        self._tally.clear()
        log.warning("connections in the last %g s: %s", REPORT_S, counts)


CONNECTIONS = web.AppKey("connections", Connections)


@web.middleware
async def connections_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Marks the connection busy while its request is handled, and keeps the reserve for the
    operator. Inside the error middleware, so a refusal leaves in the face's own shape."""
    table = request.app[CONNECTIONS]
    conn = table.get(request.transport)
    if conn is None:  # not through front.py (a test's client), or already closed
        return await handler(request)
    table.started(conn, request.content if request.body_exists else None)
    try:
        if conn.reserved and not request.app[GUARD].is_operator(request):
            table.refused_on_reserve()
            request.protocol.close()  # once this answer is out
            raise Refused(
                503,
                "every connection has a request in flight (max_connections "
                f"{table.settings.max_connections}); try again shortly",
                "max_connections",
            )
        return await handler(request)
    finally:
        table.finished(conn)


def install(app: web.Application, settings: Settings) -> None:
    app[CONNECTIONS] = Connections(settings)
