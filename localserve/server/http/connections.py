"""The daemon's connections: how many a client may hold, how long a request's head may take to
arrive, how long a connection may sit idle or leave its answer unread, and the room kept for
this user's CLI and tray.

aiohttp bounds none of these: it takes every connection it is given, has no timeout on a
request's head and keeps an idle connection for an hour (`keepalive_timeout`, 3630 s).

The design rests on one fact: a connection with no request in flight holds nothing of value,
and HTTP lets a server close it at any time (clients open another). Nor does one whose client
reads none of its answer: no one is served by it.
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
- **Slow readers.** A handler that writes faster than its client reads fills the transport
  past its high-water mark; asyncio then pauses it (front.py passes the pause on, and the
  resume) and the handler waits in `write()` for the client. A client that reads nothing of
  a stream or a download so holds its connection for ever, and a generation's slot to the
  answer's end: 256 of them once locked every other client out with 503s. So output that
  waits in the transport, not shrinking (the client read none of it: while the handler waits
  nothing is added), for `write_timeout` is given up: the connection is aborted (there is no
  answer left to give), aiohttp cancels its handler (daemon.py's `handler_cancellation`), and
  that cancels the generation and frees its slot, as when a client leaves. Under pressure it
  gives way sooner: unread for UNREAD_GRACE_S, the longest unread first. Only the transport's
  buffer is looked at, at a pause, a resume and a deadline, and when room is wanted: a few
  calls per pause, none per byte. Until the kernel's socket buffers are full (up to megabytes
  on loopback) a client that does not read looks like one that does; by then it has cost the
  daemon what any client may.
- **Timeouts.** A heading connection whose head is not in within `header_timeout` is closed,
  after a 408 if it sent anything (one that sent nothing gets no answer, as from Go's server);
  a waiting one is closed after `idle_timeout`, unless an answer is still leaving at the pace
  its client reads. A busy one has no timeout here but `write_timeout` (above): its body has
  `body_timeout` (limits.py).
- **Room.** A new connection takes a slot when its client address (an IPv6 /64, which one
  machine holds whole) has fewer than `max_connections_per_address` and the daemon fewer than
  `max_connections`. Otherwise the connection of that address, or of the daemon, that holds
  least is closed to make room: the oldest heading one (heading for HEAD_GRACE_S or more),
  else the slowest stalled one, else the longest unread answer, else the oldest heading one
  younger than that (its client may not have sent its head yet), else the oldest waiting one
  (last: its client may be sending its next request down it as it closes, which the client
  sees as a reset; bench_abuse lost a third of its requests so while stalled bodies outlasted
  them). giving_way.py keeps the order and why. So idle, trickling and non-reading sockets,
  however many and from however many addresses, never keep a client out: only requests
  really in flight, read by their clients, fill the slots. Loopback has no per-address cap:
  every local client, the editor and an attacker alike, is 127.0.0.1, so a cap there could
  only refuse the editor.
- **Never one whose head is on its way.** An attacker who reopens its sockets brings a burst
  of new ones each time the loop wakes, and those connections' `connection_made` run before
  the loop reads what arrived in the same turn: a client's connection, its head already in
  the kernel, could be the oldest idle one and be closed unread (the first run of
  benchmarks/bench_abuse.py lost half its requests so). So a connection whose bytes waiting
  unread on its socket end a head (FIONREAD, then a peek; Windows cannot say) does not give
  way, nor one still sending an answer its client reads. Any byte waiting once saved one: then
  a burst of new tricklers, each with a byte waiting, filled every slot within one turn of
  the loop and the client behind them was refused (giving_way.py tells it).
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
import json
import logging
from collections import Counter
from collections.abc import Callable
from typing import Any

from aiohttp import web

from localserve.ground.settings import Settings
from localserve.server.http.errors import RETRY_AFTER_S
from localserve.server.http.giving_way import Conn, State, victims
from localserve.server.http.guard import GUARD, Handler
from localserve.server.http.peers import client_group, loopback
from localserve.server.http.refused import Refused

log = logging.getLogger(__name__)

REPORT_S = 10.0
_END_OF_HEAD = b"\r\n\r\n"

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
# under pressure, or to a client that stalls or reads none of its answer, is summed up: a
# keep-alive connection left idle, or one a browser opened ahead and never used, closes every
# day (logged at DEBUG).
_REASONS = {
    "evicted": "idle closed to make room",
    "stalled": "stalled bodies closed to make room",
    "unread": "unread answers closed to make room",
    "write_timeout": "answers left unread past write_timeout",
    "header_timeout": "heads not in within header_timeout",
    "refused": "refused with every connection busy",
    "reserve": "requests refused on the operator's reserve",
}


class Connections:
    """Every open connection of the daemon, with the rules above."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self._conns: dict[asyncio.BaseTransport, Conn] = {}
        self._groups: dict[str, set[Conn]] = {}  # the ordinary connections of each address
        self._reserve: set[Conn] = set()
        # Heading and waiting connections in the order they entered their state, the oldest
        # first (a dict keeps its order): the order they give way in, without a sort.
        self._idle: dict[Conn, None] = {}
        self._busy: set[Conn] = set()
        self._tally: Counter[str] = Counter()
        self._report: asyncio.TimerHandle | None = None

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
        conn = Conn(transport, group, reserved, asyncio.get_running_loop().time())
        self._conns[transport] = conn
        self._idle[conn] = None
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
        conn.read()
        if conn.state is State.BUSY:
            conn.body_bytes += len(data)
            return
        if conn.state is State.WAITING:
            self._enter(conn, State.HEADING)
            conn.began = asyncio.get_running_loop().time()
            self._arm(conn, self.settings.header_timeout)
        conn.heard = True
        if _END_OF_HEAD in data or _END_OF_HEAD in conn.tail + data[:3]:
            # Busy, but the head's deadline stays until a handler starts: the blank line may
            # be a body's that aiohttp reads past (a request it answered without reading it),
            # and no handler will ever mark this connection waiting again.
            self._enter(conn, State.BUSY)
            conn.heard, conn.tail = False, b""
            conn.body_from = asyncio.get_running_loop().time()
            conn.body_bytes = len(data) - (data.find(_END_OF_HEAD) + len(_END_OF_HEAD))
        else:
            conn.tail = (conn.tail + data[-3:])[-3:]

    def started(self, conn: Conn, body: Any = None) -> None:
        """A request's handler starts; `body` is its stream, if the request has a body."""
        if conn.alive:
            self._enter(conn, State.BUSY)
        conn.heard, conn.tail, conn.handled, conn.body = False, b"", True, body
        if not conn.body_from:  # its head's end was not seen (a test's client)
            conn.body_from = asyncio.get_running_loop().time()
        self._arm(conn, 0)

    def finished(self, conn: Conn) -> None:
        """Its handler has returned: the connection waits for the next request."""
        conn.handled, conn.body, conn.body_from = False, None, 0.0
        if not conn.alive:
            return
        self._enter(conn, State.WAITING)
        conn.unread(asyncio.get_running_loop().time())  # what of its answer is still to leave
        self._arm(conn, self.settings.idle_timeout)

    def writing(self, conn: Conn, *, paused: bool) -> None:
        """Its transport's output rose past the high-water mark (the handler now waits for
        the client to read), or drained below the low one (the client reads)."""
        conn.paused = paused
        if not conn.alive or not conn.handled:
            return
        now = asyncio.get_running_loop().time()
        since = conn.unread(now)
        if since is not None and self.settings.write_timeout > 0:
            self._arm(conn, since + self.settings.write_timeout - now)

    def lost(self, conn: Conn) -> None:
        self._drop(conn)

    def _enter(self, conn: Conn, state: State) -> None:
        """`conn` now in `state`, the newest of it."""
        conn.state = state
        self._idle.pop(conn, None)
        self._busy.discard(conn)
        if state is State.BUSY:
            self._busy.add(conn)
        else:
            self._idle[conn] = None

    def refused_on_reserve(self) -> None:
        self._count("reserve")

    # -- room ----------------------------------------------------------------------------------

    def _make_room(self, group: str) -> bool:
        """Whether an ordinary slot is free for a connection from `group`, once the oldest
        idle connection in the way (if any) is closed."""
        settings = self.settings
        share = self._groups.get(group, set())
        cap = 0 if loopback(group) else settings.max_connections_per_address
        if cap and len(share) >= cap and not self._evict(share.__contains__):
            return False
        if len(self._conns) - len(self._reserve) < settings.max_connections:
            return True
        return self._evict(lambda c: not c.reserved)

    def _make_reserve_room(self) -> bool:
        if len(self._reserve) < self.settings.operator_reserve:
            return True
        return self._evict(lambda c: c.reserved)

    def _evict(self, within: Callable[[Conn], bool]) -> bool:
        """Close the connection `within` the scope that holds least and may give way (the
        order is giving_way.py's); False if none may."""
        now = asyncio.get_running_loop().time()
        idle = [c for c in self._idle if within(c)]
        busy = [c for c in self._busy if within(c)]
        for victim, reason in victims(idle, busy, now):
            self._close(victim, reason, _STALLED if reason == "stalled" else None)
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
        now = asyncio.get_running_loop().time()
        if conn.state is State.BUSY and conn.handled:  # armed as its output stopped leaving
            since = conn.unread(now)
            if since is None:  # it left again; the next pause arms this anew
                return
            left = since + self.settings.write_timeout - now
            if left > 0:  # some of it left since (the client reads, slowly)
                self._arm(conn, left)
            else:
                self._close(conn, "write_timeout")
        elif conn.state is State.BUSY:  # its head seemed in, yet no handler came
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
            since = conn.unread(now)
            if since is not None and now - since < self.settings.idle_timeout:
                # An answer still leaving as it is read: some of it left since the last look.
                self._arm(conn, since + self.settings.idle_timeout - now)
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
        self._idle.pop(conn, None)
        self._busy.discard(conn)
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
