"""A cache keyed by client input is bounded by the bytes it holds, not its entries (issue #57):
the least recently used go first, and an entry heavier than the whole budget is not kept
(ground/byte_lru.py)."""

from __future__ import annotations

from localserve.ground.byte_lru import ByteLRU, text_bytes


def by_length(key: str, value: str) -> int:
    return len(key) + len(value)


def test_entries_are_dropped_once_their_bytes_pass_the_budget() -> None:
    cache: ByteLRU[str, str] = ByteLRU(10, by_length)
    cache.put("a", "1234")  # 5 bytes
    cache.put("b", "1234")  # 10: at the budget, both kept
    assert len(cache) == 2 and cache.total == 10
    cache.put("c", "1")  # 12: the oldest goes
    assert "a" not in cache and cache.get("b") == "1234" and cache.total == 7


def test_the_least_recently_used_goes_first_not_the_oldest_put() -> None:
    cache: ByteLRU[str, str] = ByteLRU(10, by_length)
    cache.put("a", "1234")
    cache.put("b", "1234")
    assert cache.get("a") == "1234"  # a is now the most recently used
    cache.put("c", "1")
    assert "b" not in cache and "a" in cache and "c" in cache


def test_many_small_entries_fit_where_one_large_one_would() -> None:
    cache: ByteLRU[str, str] = ByteLRU(1000, by_length)
    for i in range(100):
        cache.put(f"{i:02d}", "12345678")
    assert len(cache) == 100 and cache.total == 1000
    cache.put("big", "x" * 600)
    assert cache.total <= 1000 and len(cache) == 40


def test_an_entry_heavier_than_the_budget_is_not_kept() -> None:
    cache: ByteLRU[str, str] = ByteLRU(10, by_length)
    cache.put("a", "1")
    cache.put("huge", "x" * 100)
    assert "huge" not in cache and cache.get("a") == "1" and cache.total == 2


def test_a_key_put_again_is_weighed_again() -> None:
    cache: ByteLRU[str, str] = ByteLRU(10, by_length)
    cache.put("a", "123456789")
    cache.put("a", "1")
    assert cache.total == 2 and cache.get("a") == "1"
    cache.put("a", "x" * 100)  # too heavy now: the old value goes too, not kept stale
    assert "a" not in cache and cache.total == 0


def test_a_miss_is_none() -> None:
    cache: ByteLRU[str, str] = ByteLRU(10, by_length)
    assert cache.get("nothing") is None


def test_strings_weigh_what_python_holds_them_in() -> None:
    assert text_bytes(["x" * 1000]) >= 1000
    assert text_bytes(["✓" * 1000]) >= 2000  # two bytes a character, as Python holds these
