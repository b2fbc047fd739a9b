"""Which client address a connection counts against (the live behaviour of the connection table
is in tests/live/test_limits.py)."""

from __future__ import annotations

import pytest

from localserve.server.http.connections import client_group


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
