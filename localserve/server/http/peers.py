"""What a connection's socket tells of its client: the address it counts against, whether that
is this machine, and whether bytes wait unread on it (server/http/connections.py)."""

from __future__ import annotations

import asyncio
import ipaddress
import sys
from typing import Any


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


def unread(transport: asyncio.BaseTransport) -> bool:
    """Whether bytes wait on the socket that the loop has not read yet (False where the
    platform cannot say: Windows)."""
    sock = transport.get_extra_info("socket")
    if sys.platform == "win32" or sock is None:
        return False
    import fcntl
    import termios

    try:
        waiting = fcntl.ioctl(sock.fileno(), termios.FIONREAD, b"\0\0\0\0")
    except OSError:
        return False
    return int.from_bytes(waiting, sys.byteorder) > 0
