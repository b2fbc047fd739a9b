"""The Host headers the guard serves and refuses, case by case: the WHATWG URL standard's host
parsing edge cases (IPv4 numbers, percent-encoding, IDNA, trailing dots, what ends a host) and
the DNS-rebinding write-ups (Ollama's CVE-2024-28224, Jupyter's Host check, the "0.0.0.0 day").

A browser parses the URL it fetches with the WHATWG standard and sends the host it read, so a
Host means what that parse makes of it. Each case: the header, and why it is served or not.
"""

from __future__ import annotations

import pytest

from localserve.server.http.guard import Guard


def guard(
    loopback: bool = True, hosts: tuple[str, ...] = (), own: frozenset[str] = frozenset()
) -> Guard:
    return Guard(loopback, hosts, (), None, None, own)


FULLWIDTH = "\uff4c\uff4f\uff43\uff41\uff4c\uff48\uff4f\uff53\uff54"
SERVED = {
    "localhost": "the loopback name",
    "localhost:11434": "any port: a proxy or a forwarded port may stand between",
    "LOCALHOST:11434": "host names are case-insensitive; browsers send them lowercase",
    "localhost.": "the absolute form of the same DNS name (RFC 6761 keeps localhost. loopback)",
    "app.localhost": "RFC 6761: every name under localhost is loopback (dev servers use them)",
    "app.localhost.:3000": "the absolute form of a name under localhost",
    "127.0.0.1": "the loopback address",
    "127.1.2.3:8080": "all of 127.0.0.0/8 is loopback",
    "[::1]": "the IPv6 loopback address",
    "[::1]:11434": "with a port",
    "[0:0:0:0:0:0:0:1]": "::1 written out",
    "[::ffff:127.0.0.1]": "IPv4-mapped 127.0.0.1: a socket to it reaches 127.0.0.1",
    "127.1": "WHATWG's IPv4 parser reads 127.0.0.1 (curl sends the address as typed)",
    "0x7f.1": "WHATWG IPv4, hexadecimal: 127.0.0.1",
    "0177.0.0.1": "WHATWG IPv4, octal: 127.0.0.1",
    "2130706433": "WHATWG IPv4, one number: 127.0.0.1",
    "127.0.0.1.": "WHATWG's IPv4 parser drops one trailing dot",
    "%6cocalhost": "WHATWG percent-decodes a host: localhost",
    FULLWIDTH: "fullwidth letters: IDNA maps them to localhost",
    "localhost:": "an empty port is no port (RFC 3986: port = *DIGIT)",
    "": "no name at all (RFC 9110's empty Host): no browser sends one",
}

FOREIGN = {
    "evil.example.com": "DNS rebinding: a page's own name, re-resolved to 127.0.0.1",
    "evil.example.com:11434": "with our port, as a rebound page sends it",
    "localhost.evil.com": "starts with localhost, but evil.com's",
    "evil.localhost.evil.com": "holds .localhost, but evil.com's",
    "127.0.0.1.nip.io": "a public name that resolves to 127.0.0.1: a ready-made rebinding host",
    "localhost%2eevil.com": "percent-decoded, localhost.evil.com",
    "xn--localhost": "IDNA's ASCII form of another name",
    "localhost..": "one trailing dot is the DNS root; two leave an empty label, no resolver's",
    "0.0.0.0": "the '0.0.0.0 day': no local name; pages reach a loopback server through it",
    "0.0.0.0:11434": "the same, with our port",
    "0": "WHATWG IPv4: 0.0.0.0",
    "[::]": "IPv6's 0.0.0.0",
    "[::127.0.0.1]": "IPv4-compatible (deprecated): no stack routes it to loopback",
    "192.168.1.5": "a LAN address, not this machine's here",
}

MALFORMED = {
    "localhost:80@evil.com": "a userinfo: a URL parser reads evil.com (RFC 9110's Host has none)",
    "user@localhost": "a userinfo",
    "evil.com#.localhost": "a fragment: the host is evil.com, whatever the text ends with",
    "evil.com?.localhost": "a query",
    "localhost/x": "a path",
    "localhost\\evil.com": "a backslash, which WHATWG reads as a path's start",
    "local host": "a space",
    "localhost\t": "a tab, which WHATWG would drop",
    "localhost:99999": "a port past 65535",
    "localhost:abc": "a port that is no number",
    "localhost:11434:11434": "two ports",
    "::1": "IPv6 without its brackets",
    "[::1": "an unclosed bracket",
    "[::1]x": "text after the brackets",
    "evil.1": "ends in a number, so WHATWG reads IPv4, and it is none",
    "1.2.3.4.5": "five IPv4 parts",
    ":11434": "a port with no host",
}


@pytest.mark.parametrize(("header", "why"), SERVED.items())
def test_local_hosts_are_served_on_loopback(header: str, why: str) -> None:
    assert guard().host_allowed(header), why


@pytest.mark.parametrize(("header", "why"), {**FOREIGN, **MALFORMED}.items())
def test_other_hosts_are_refused_on_loopback(header: str, why: str) -> None:
    assert not guard().host_allowed(header), why


@pytest.mark.parametrize(
    "header", ["mybox", "mybox:11434", "MyBox.", "192.168.1.5", "3232235781", "[fe80::1]"]
)
def test_this_machines_own_names_and_addresses_are_served(header: str) -> None:
    own = guard(own=frozenset({"mybox", "192.168.1.5", "[fe80::1]"}))
    assert own.host_allowed(header)


@pytest.mark.parametrize(
    ("header", "served"),
    [
        ("printer.lan", True),
        ("box:11434", True),
        ("box.", True),
        ("BOX", True),
        ("box.evil.com", False),
        ("lan", False),
        ("evil.com#.lan", False),
        ("evil.com:1@x.lan", False),
    ],
)
def test_the_operators_patterns_match_the_whole_host(header: str, served: bool) -> None:
    assert guard(hosts=("*.lan", "box")).host_allowed(header) is served


def test_0000_is_served_on_loopback_when_the_operator_names_it() -> None:
    assert guard(hosts=("0.0.0.0",)).host_allowed("0.0.0.0:11434")


def test_bound_beyond_loopback_with_no_names_any_host_is_served() -> None:
    assert guard(loopback=False).host_allowed("evil.example.com")


@pytest.mark.parametrize("header", ["localhost:80@evil.com", "local host", "localhost:99999"])
def test_bound_beyond_loopback_a_malformed_host_is_still_refused(header: str) -> None:
    assert not guard(loopback=False).host_allowed(header)
