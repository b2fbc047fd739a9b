"""What a connection's socket tells of its client: the address it counts against, whether that
is this machine, and what waits unread on it (server/http/connections.py)."""

from __future__ import annotations

import asyncio
import ipaddress
import socket
import sys
from typing import Any

# Bytes of a head looked at, unread, to tell whether they end it: past this many waiting, a
# request is on its way whatever they hold (aiohttp refuses a head line longer than 8190).
PEEK = 16384


def client_group(peer: Any) -> str:
    """The address a connection counts against: its IPv4 address, or its IPv6 /64."""
    host = peer[0] if isinstance(peer, tuple) and peer else str(peer)
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        return host
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            return str(ip.ipv4_mapped)
        if not ip.is_loopback:
            return str(ipaddress.IPv6Network((int(ip) >> 64 << 64, 64)))
    return str(ip)


def loopback(group: str) -> bool:
    try:
        return ipaddress.ip_address(group).is_loopback
    except ValueError:  # an IPv6 /64, or no address at all (a Unix socket)
        return False


def pending(transport: asyncio.BaseTransport) -> int:
    """Bytes waiting on the socket that the loop has not read yet (0 where the platform cannot
    say: Windows)."""
    sock = transport.get_extra_info("socket")
    if sys.platform == "win32" or sock is None:
        return 0
    import fcntl
    import termios

    try:
        waiting = fcntl.ioctl(sock.fileno(), termios.FIONREAD, b"\0\0\0\0")
    except OSError:
        return 0
    return int.from_bytes(waiting, sys.byteorder)


def head_waiting(
    transport: asyncio.BaseTransport, tail: bytes = b"", count: int | None = None
) -> bool:
    """Whether the bytes waiting unread on the socket (`count` of them, if the caller has
    asked) end a request's head, after `tail` (the head's last bytes read so far): a client's
    request on its way. A few bytes of a head that never ends (a trickler's) are no such."""
    if count is None:
        count = pending(transport)
    if not count:
        return False
    if count > PEEK:
        return True
    sock = transport.get_extra_info("socket")
    # asyncio's TransportSocket cannot recv: a socket object on the same descriptor can peek,
    # and is detached (never closed) after.
    try:
        peer = socket.socket(fileno=sock.fileno())
    except OSError:
        return False
    try:
        peeked = peer.recv(count, socket.MSG_PEEK | socket.MSG_DONTWAIT)
    except OSError:
        return False
    finally:
        peer.detach()
    return b"\r\n\r\n" in tail + peeked
