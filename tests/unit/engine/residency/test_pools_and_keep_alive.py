"""Memory sizes, pools and keep-alive durations: pure parsing and bookkeeping."""

import pytest

from localserve.engine.residency.pools import MemoryPool
from localserve.ground.errors import BadRequest
from localserve.ground.units import parse_keep_alive, parse_size


@pytest.mark.parametrize(
    "text, expected",
    [("512MiB", 512 << 20), ("2G", 2 << 30), ("1.5GiB", 3 << 29), ("1048576", 1 << 20)],
)
def test_memory_sizes_read_in_binary_units(text: str, expected: int) -> None:
    assert parse_size(text) == expected


def test_memory_size_without_a_number_is_refused() -> None:
    with pytest.raises(ValueError, match="not a memory size"):
        parse_size("lots")


def test_pool_counts_reservations_against_its_budget() -> None:
    pool = MemoryPool("cpu", 1000)
    pool.reserve("a", 600)
    assert not pool.fits(500) and pool.fits(400)
    pool.release("a")
    assert pool.free == 1000


@pytest.mark.parametrize(
    "value, seconds",
    [("5m", 300.0), ("1h30m", 5400.0), ("30s", 30.0), (0, 0.0), ("0", 0.0), (45, 45.0)],
)
def test_keep_alive_durations_become_seconds(value: object, seconds: float) -> None:
    assert parse_keep_alive(value) == seconds


@pytest.mark.parametrize("value", [-1, "-1", "-5m", 7.3e15, "inf", 10**400, -(10**400)])
def test_negative_keep_alive_means_for_ever(value: object) -> None:
    assert parse_keep_alive(value) is None


@pytest.mark.parametrize("value", ["soon", True, [5], "nan"])
def test_keep_alive_that_is_not_a_duration_is_a_bad_request(value: object) -> None:
    with pytest.raises(BadRequest):
        parse_keep_alive(value)
