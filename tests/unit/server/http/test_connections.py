"""Which client address a connection counts against, and the per-address cap that applies to
every address but loopback's (the live behaviour of the connection table is in
tests/live/test_connections.py; a non-loopback client cannot be made there)."""

from __future__ import annotations

import asyncio
import socket
from typing import Any

import pytest

from localserve.ground.settings import Settings
from localserve.server.http import giving_way
from localserve.server.http.connections import Connections
from localserve.server.http.giving_way import UNREAD_GRACE_S
from localserve.server.http.peers import client_group


class Socket:
    """A transport as the table sees it: a peer, nothing unsent, and whether it was closed."""

    def __init__(self, host: str) -> None:
        self.peer, self.closed = (host, 50000), False

    def get_extra_info(self, name: str) -> Any:
        return self.peer if name == "peername" else None

    def get_write_buffer_size(self) -> int:
        return 0

    def write(self, data: bytes) -> None:
        pass

    def close(self) -> None:
        self.closed = True

    abort = close


def opened(host: str, n: int) -> list[Socket]:
    """`n` connections from `host` to a table of 8 slots, at most 2 an address."""

    async def run() -> list[Socket]:
        table = Connections(Settings(max_connections=8, max_connections_per_address=2))
        sockets = [Socket(host) for _ in range(n)]
        for s in sockets:
            table.open(s)  # type: ignore[arg-type]
        return sockets

    return asyncio.run(run())


def test_past_the_per_address_cap_a_remote_address_gives_up_its_oldest_idle_connection() -> None:
    assert [s.closed for s in opened("10.0.0.5", 3)] == [True, False, False]


@pytest.mark.parametrize("host", ["127.0.0.1", "::1"])
def test_loopback_which_every_local_client_shares_has_no_per_address_cap(host: str) -> None:
    assert not any(s.closed for s in opened(host, 8))


@pytest.mark.parametrize(
    "peer, group",
    [
        (("127.0.0.1", 50000), "127.0.0.1"),
        (("127.0.0.2", 50000), "127.0.0.2"),
        (("::1", 50000, 0, 0), "::1"),
        (("::ffff:10.0.0.7", 50000, 0, 0), "10.0.0.7"),
    ],
)
def test_an_ipv4_or_loopback_client_counts_as_its_own_address(peer, group) -> None:
    assert client_group(peer) == group


def test_ipv6_clients_of_one_slash_64_count_as_one_address() -> None:
    one = client_group(("2001:db8:1:2::1", 50000, 0, 0))
    other = client_group(("2001:db8:1:2:ffff::9", 50000, 0, 0))
    assert one == other == "2001:db8:1:2::/64"
    assert client_group(("2001:db8:1:3::1", 50000, 0, 0)) != one


def test_a_scoped_link_local_address_is_grouped_too() -> None:
    assert client_group(("fe80::1%lo", 50000, 0, 0)) == "fe80::/64"


# -- which connection gives way (#57: the order is pinned) -------------------------------------


class Body:
    """A request body still arriving (aiohttp's stream, as the table reads it)."""

    def is_eof(self) -> bool:
        return False


def test_a_stalled_body_gives_way_before_an_older_waiting_keep_alive_connection() -> None:
    async def run() -> tuple[bool, bool]:
        table = Connections(Settings(max_connections=2))
        waiting, stalled = Socket("127.0.0.1"), Socket("127.0.0.1")
        first, second = table.open(waiting), table.open(stalled)  # type: ignore[arg-type]
        assert first is not None and second is not None
        table.started(first)
        table.finished(first)  # waiting for its next request, the older of the two
        table.started(second, Body())
        second.body_from -= 10.0  # 10 s into a body of no bytes: far below MIN_BODY_RATE
        table.open(Socket("127.0.0.1"))  # type: ignore[arg-type]
        return waiting.closed, stalled.closed

    assert asyncio.run(run()) == (False, True)


class Peer(Socket):
    """A transport over one end of a real socket pair, so that what waits unread on it is
    real; the other end is the client's."""

    def __init__(self) -> None:
        super().__init__("127.0.0.1")
        self.sock, self.client = socket.socketpair()

    def get_extra_info(self, name: str) -> Any:
        return self.sock if name == "socket" else super().get_extra_info(name)


class Writer(Socket):
    """A transport with `size` bytes of output waiting unsent."""

    size = 0

    def get_write_buffer_size(self) -> int:
        return self.size


def test_a_trickler_with_a_byte_waiting_unread_still_gives_way() -> None:
    async def run() -> tuple[bool, bool]:
        table = Connections(Settings(max_connections=2))
        trickler, client = Peer(), Peer()
        table.open(trickler)  # type: ignore[arg-type]
        table.open(client)  # type: ignore[arg-type]
        trickler.client.send(b"G")  # a head's first byte, not yet read by the loop
        client.client.send(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        table.open(Socket("127.0.0.1"))  # type: ignore[arg-type]
        return trickler.closed, client.closed

    assert asyncio.run(run()) == (True, False)


def test_a_connection_whose_waiting_bytes_end_a_head_does_not_give_way() -> None:
    async def run() -> tuple[bool, Any]:
        table = Connections(Settings(max_connections=1, operator_reserve=0))
        client = Peer()
        table.open(client)  # type: ignore[arg-type]
        client.client.send(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        return client.closed, table.open(Socket("127.0.0.1"))  # type: ignore[arg-type]

    assert asyncio.run(run()) == (False, None)


def test_a_heads_unread_bytes_are_peeked_at_again_only_once_more_arrive(monkeypatch) -> None:
    peeks: list[int] = []
    real = giving_way.head_waiting

    def counted(transport: Any, tail: bytes = b"", count: int | None = None) -> bool:
        peeks.append(count or 0)
        return real(transport, tail, count)

    monkeypatch.setattr(giving_way, "head_waiting", counted)

    async def run() -> None:
        table = Connections(Settings(max_connections=1, operator_reserve=0))
        client = Peer()
        conn = table.open(client)  # type: ignore[arg-type]
        assert conn is not None
        client.client.send(b"GET /health HTTP/1.1\r\n")  # a head begun, not ended
        client.client.send(b"Host: 127.0.0.1\r\n")
        await asyncio.sleep(0)
        conn.began -= 10  # past the head's grace: it would give way, but for its bytes
        assert not giving_way._head_on_its_way(conn) and not giving_way._head_on_its_way(conn)
        client.client.send(b"\r\n")
        assert giving_way._head_on_its_way(conn) and giving_way._head_on_its_way(conn)

    asyncio.run(run())
    assert peeks == [39, 41]  # one look per new byte count; a head found stays found


def test_an_unread_answer_gives_way_before_an_older_waiting_keep_alive_connection() -> None:
    async def run() -> tuple[bool, bool]:
        table = Connections(Settings(max_connections=2))
        waiting, unread = Socket("127.0.0.1"), Writer("127.0.0.1")
        first, second = table.open(waiting), table.open(unread)  # type: ignore[arg-type]
        assert first is not None and second is not None
        table.started(first)
        table.finished(first)
        table.started(second)
        unread.size = 100_000
        table.writing(second, paused=True)  # the handler now waits for its client to read
        assert second.out_since is not None
        second.out_since -= UNREAD_GRACE_S  # and has waited so, unread, past the grace
        table.open(Socket("127.0.0.1"))  # type: ignore[arg-type]
        return waiting.closed, unread.closed

    assert asyncio.run(run()) == (False, True)


def test_an_answer_its_client_reads_does_not_give_way() -> None:
    async def run() -> bool:
        table = Connections(Settings(max_connections=1, operator_reserve=0))
        reading = Writer("127.0.0.1")
        conn = table.open(reading)  # type: ignore[arg-type]
        assert conn is not None
        table.started(conn)
        reading.size = 100_000
        table.writing(conn, paused=True)
        assert conn.out_since is not None
        conn.out_since -= UNREAD_GRACE_S
        reading.size = 60_000  # some of it left: the client reads
        table.open(Socket("127.0.0.1"))  # type: ignore[arg-type]
        return reading.closed

    assert asyncio.run(run()) is False


def test_an_unread_answer_gives_way_before_a_connection_that_has_just_opened() -> None:
    async def run() -> tuple[bool, bool]:
        table = Connections(Settings(max_connections=2))
        unread, fresh = Writer("127.0.0.1"), Socket("127.0.0.1")
        conn = table.open(unread)  # type: ignore[arg-type]
        assert conn is not None
        table.started(conn)
        unread.size = 100_000
        table.writing(conn, paused=True)
        assert conn.out_since is not None
        conn.out_since -= UNREAD_GRACE_S
        table.open(fresh)  # type: ignore[arg-type]  # its client's head may be on its way
        table.open(Socket("127.0.0.1"))  # type: ignore[arg-type]
        return unread.closed, fresh.closed

    assert asyncio.run(run()) == (True, False)
