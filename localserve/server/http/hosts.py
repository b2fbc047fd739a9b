"""What a Host header or an Origin names, read as a browser reads it.

A browser parses the URL it fetches by the WHATWG URL standard and sends the host that parse
gave, so the guard (server/http/guard.py) parses both headers by the same standard, with
ada_url (the parser Node.js uses), and compares the whole host with what it allows, never a
prefix or a suffix of the header's text. `127.1`, `0x7f.1` and `2130706433` are 127.0.0.1
to WHATWG's IPv4 parser, and `%6cocalhost` is localhost: a client that sends them means
loopback. A name is served for what it is, not how it is spelled.

The cases decided here, each one in tests/unit/server/http/test_host_corpus.py:
- **A trailing dot.** `localhost.` is the absolute form of the same DNS name, and RFC 6761
  keeps it and every name under it loopback (no registry can delegate them), so one trailing
  dot is dropped before names are compared; two leave an empty label, which no resolver gives.
- **0.0.0.0** (and `[::]`) is no loopback address, and no local page's name: the "0.0.0.0
  day" write-up has pages reaching loopback servers through it. Served only when the operator
  names it in `allowed_hosts`.
- **`[::ffff:127.0.0.1]`** is served: a socket to the IPv4-mapped address reaches 127.0.0.1.
- **Not a Host at all.** RFC 9110's Host is `uri-host [":" port]`, so a userinfo, a path, a
  query, a fragment, a backslash, whitespace or a control character makes the header no Host
  (`localhost:80@evil.com` is evil.com to a URL parser, `evil.com#.localhost` too); so does a
  value the URL parser refuses (a port past 65535, `evil.1`, an unbracketed IPv6).
"""

from __future__ import annotations

import ipaddress
import re
import socket
from dataclasses import dataclass

from ada_url import URL

# What RFC 9110's Host cannot hold but a URL's authority can, or what the URL parser drops
# silently (tabs) where it should refuse.
_NOT_IN_HOST = re.compile(r"[/?#@\\\x00-\x20\x7f]")
# A browser's page: the schemes whose origins are a scheme, a host and a port.
WEB_SCHEMES = frozenset({"http", "https"})


def parse_host(header: str) -> str | None:
    """The host a Host header names, as WHATWG serializes it (lowercase ASCII, IPv4 in dotted
    decimal, IPv6 in brackets), without its trailing root dot; None if it is no Host."""
    if _NOT_IN_HOST.search(header):
        return None
    try:
        host = URL(f"http://{header}").hostname
    except ValueError:  # UnicodeError too: a header that is not text
        return None
    return _without_root(host) or None


def _without_root(host: str) -> str:
    return host[:-1] if host.endswith(".") else host


@dataclass(frozen=True)
class Origin:
    scheme: str
    host: str  # as `parse_host` gives it; "" for file://
    text: str  # the header, which is the origin's serialization


def parse_origin(header: str) -> Origin | None:
    """The page an Origin header names, or None if it names none: `null` (sandboxed frames
    and data: pages on any site send it), or a web origin that is not the serialization a
    browser sends (with a path, a userinfo, capitals, the default port), which came from no
    browser and could read one way to the parser and another to an operator's pattern."""
    try:
        url = URL(header)
    except ValueError:
        return None
    scheme = url.protocol.removesuffix(":")
    if scheme in WEB_SCHEMES and url.origin != header:
        return None
    return Origin(scheme, _without_root(url.hostname), header)


def is_loopback_host(host: str) -> bool:
    """Whether a host, as `parse_host` gives it, can only be this machine: `localhost` and the
    names under it (RFC 6761), 127.0.0.0/8, ::1 and IPv4-mapped 127.0.0.0/8."""
    if host == "localhost" or host.endswith(".localhost"):
        return True
    address = _address(host)
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return address is not None and address.is_loopback


def _address(host: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(host.removeprefix("[").removesuffix("]"))
    except ValueError:
        return None


def is_loopback(bind: str) -> bool:
    """Whether a bind address (`127.0.0.1`, `::1`, `localhost`) listens on loopback only."""
    host = parse_host(f"[{bind}]" if ":" in bind and not bind.startswith("[") else bind)
    return host is not None and is_loopback_host(host)


def own_hosts() -> frozenset[str]:
    """This machine's names and addresses, as its other programs may call it, in the form
    `parse_host` gives."""
    names = [socket.gethostname()]
    try:
        for info in socket.getaddrinfo(socket.gethostname(), None):
            address = str(info[4][0]).partition("%")[0]  # an IPv6 zone is no part of a Host
            names.append(f"[{address}]" if ":" in address else address)
    except OSError:
        pass
    return frozenset(host for name in names if (host := parse_host(name)) is not None)
