"""A connection as the table keeps it (connections.py), what it holds, and the order in which
those that hold least give way to a new connection.

The order, each kind in turn, the first that may:
- **Heading** past HEAD_GRACE_S (its head begun, or nothing sent yet, that long ago), the
  oldest first, unless the bytes waiting unread on its socket end a head: a client's request
  on its way, behind a burst of new sockets whose `connection_made` run before the loop reads
  any of them. A byte or two of a head that never ends do not save one. Once they did (any
  unread byte did): a burst of new sockets of 300 tricklers, each with its first byte already
  waiting (the loop was slow to accept, and they had trickled in the backlog), could not give
  way within the turn that admitted them; 248 of them, beside 8 requests in flight, filled
  every slot, 8 more the operator's reserve, and a client behind them in the same burst, the
  CLI's status call too, was refused at once with a 503 (1 run of 3 in #57; reproduced in 2
  of 6 of bench_abuse's heads runs with the machine's cores busy, and in none of 4 since).
  Walking past them cost a FIONREAD each, for every new socket: a slower loop, larger bursts.
- **Stalled** bodies, the slowest first: a body still arriving past STALL_GRACE_S slower than
  MIN_BODY_RATE, counting the bytes waiting unread on its socket.
- **Unread** answers, the longest unread first: output waits in the transport, and has not
  shrunk since UNREAD_GRACE_S or longer, while the handler waits on the client to read (its
  writing is paused: the transport's buffer is past its high-water mark) or has returned. The
  client reads none of it, so its connection and the generation behind it serve no one.
- **Heading** within HEAD_GRACE_S, the oldest first (a head waiting saves one, as above): a
  client that has just connected may not have sent its head yet. Among sockets that send
  nothing or trickle, these are taken all the same once none older is left; but where the
  slots are held by stalled bodies or unread answers, a client's new connection was the only
  heading one, and so the first to go: bench_abuse's clients were reset mid-request, a few of
  every 16, under the bodies and the readers attacks.
- **Waiting** (keep-alive, between requests), the oldest first, unless a head waits unread on
  it: its client may be sending its next request down it as it closes, which the client sees
  as a reset.
"""

from __future__ import annotations

import asyncio
import enum
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from localserve.server.http.peers import head_waiting, pending

# A body slower than this, this long after its head, is stalled (bytes a second, seconds).
# Clients write a body right behind its head; a grace of a second let an attack that reopens
# its sockets every second keep hundreds inside it, so only waiting keep-alive connections,
# about to carry a client's next request, were left to give way (bench_abuse lost requests).
MIN_BODY_RATE = 1024.0
STALL_GRACE_S = 0.25
# An answer unread this long (seconds) may give way. A client that reads drains a paused
# buffer (64 KiB at most, from its high-water mark to its low one) within it at 48 KiB/s, and
# on loopback within milliseconds; one that cannot has stopped reading, or nearly.
UNREAD_GRACE_S = 1.0
# A connection heading this long (seconds) has had the time to send its head: a client's is
# in within milliseconds of its connect, even on a loaded machine.
HEAD_GRACE_S = 1.0


class State(enum.Enum):
    WAITING = "waiting"
    HEADING = "heading"
    BUSY = "busy"


@dataclass(eq=False)
class Conn:
    transport: asyncio.Transport
    group: str  # the client address whose share it counts in
    reserved: bool  # in the operator's reserve
    began: float  # when it turned heading last (the loop's clock)
    state: State = State.HEADING
    heard: bool = False  # bytes of the current head have arrived
    tail: bytes = b""  # the current head's last bytes so far, to find its end across reads
    handled: bool = False  # a handler runs for it (the middleware says)
    body: Any = None  # the request's body stream while its handler runs (aiohttp's reader)
    body_from: float = 0.0  # when the head ended (the loop's clock)
    body_bytes: int = 0  # what arrived since
    paused: bool = False  # its transport holds more output than its high-water mark
    out_size: int = 0  # the output waiting in the transport at the last look
    out_since: float | None = None  # since when that output has waited without shrinking
    timer: asyncio.TimerHandle | None = None
    alive: bool = True
    # What a look at its unread bytes found (_head_on_its_way), until the loop reads more.
    peeked: int = 0
    head_in: bool = False

    def read(self) -> None:
        """The loop read bytes of it: what waits unread is to be looked at again."""
        self.peeked, self.head_in = 0, False

    def body_rate(self, now: float) -> float | None:
        """Bytes a second of a body still arriving past the grace; None if it is no such."""
        waited = now - self.body_from
        if not self.alive or self.body is None or self.body.is_eof() or waited < STALL_GRACE_S:
            return None
        return self.body_bytes / waited

    def unread(self, now: float) -> float | None:
        """Since when an answer has waited on a client that reads none of it, as of this look:
        its output held in the transport, not shrunk since, while the handler waits for the
        client (paused) or has returned. None if no answer waits so.

        Only there is the buffer's size a measure of the client's reading: nothing is added
        to it, so any shrinking is the client's. A handler that still writes, unpaused, adds
        to it as the client drains it: its output is not looked at (a pause starts anew)."""
        size = self.transport.get_write_buffer_size()
        if not size or (self.handled and not self.paused):
            self.out_size, self.out_since = size, None
            return None
        if self.out_since is None or size < self.out_size:
            self.out_since = now
        self.out_size = size
        return self.out_since


def victims(idle: Sequence[Conn], busy: Sequence[Conn], now: float) -> Iterator[tuple[Conn, str]]:
    """The connections that may give way, in the order above, each with why (as the summary
    line of connections.py counts it): of `idle` (heading and waiting, in the order they
    entered their state, the oldest first) and `busy` ones. Lazy: a kind is looked at only
    once those before it are exhausted, and only what may be of it (an attribute first), so
    that a table full of sockets that hold nothing costs a look or two per new connection."""
    young = now - HEAD_GRACE_S
    for conn in idle:
        if conn.state is State.HEADING:
            if conn.began > young:
                break  # and so are all after it: they turned heading later
            if _quiet(conn):
                yield conn, "evicted"
    stalled = [
        (rate, c) for c in busy if c.body is not None and (rate := c.body_rate(now)) is not None
    ]
    for rate, conn in sorted(stalled, key=lambda rc: rc[0]):
        if rate >= MIN_BODY_RATE:
            break
        waited = now - conn.body_from
        if (conn.body_bytes + pending(conn.transport)) / waited < MIN_BODY_RATE:
            yield conn, "stalled"
    # An answer waits unread only where output was held back (paused), or was seen waiting
    # when its handler returned (a look set out_since).
    held = [c for c in busy if c.paused] + [c for c in idle if c.out_since is not None]
    unread = [(since, c) for c in held if (since := c.unread(now)) is not None]
    for since, conn in sorted(unread, key=lambda sc: sc[0]):
        if now - since < UNREAD_GRACE_S:
            break
        yield conn, "unread"
    for conn in idle:
        if conn.state is State.HEADING and conn.began > young and _quiet(conn):
            yield conn, "evicted"
    for conn in idle:
        if conn.state is State.WAITING and _quiet(conn):
            yield conn, "evicted"


def _quiet(conn: Conn) -> bool:
    """Neither sending an answer (its client reads it: the unread kind takes those that do not)
    nor receiving a head."""
    return not conn.transport.get_write_buffer_size() and not _head_on_its_way(conn)


def _head_on_its_way(conn: Conn) -> bool:
    """head_waiting, looked at again only once more bytes wait: each new connection of a burst
    looks at every young one, and a peek apiece took a third of the loop's time under
    bench_abuse's bodies attack. A head found waiting stays so until the loop reads it."""
    if conn.head_in:
        return True
    count = pending(conn.transport)
    if count and count != conn.peeked:
        conn.peeked = count
        conn.head_in = head_waiting(conn.transport, conn.tail, count)
    return conn.head_in
