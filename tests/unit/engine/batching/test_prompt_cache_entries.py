"""Which saved slot contents the prompt cache keeps and finds (pure logic: no model involved)."""

from __future__ import annotations

from localserve.engine.batching.prefix import extends
from localserve.engine.batching.prompt_cache import PromptCache


def state(n: int) -> bytearray:
    return bytearray(n)


def test_the_entry_sharing_the_longest_prefix_is_found() -> None:
    cache = PromptCache(1000)
    cache.add([1, 2, 3, 4], state(10))
    cache.add([1, 2, 9, 9, 9], state(10))
    entry, shared = cache.longest_prefix([1, 2, 3, 7])
    assert entry is not None and entry.tokens == [1, 2, 3, 4] and shared == 3


def test_nothing_is_found_for_a_prompt_sharing_no_token() -> None:
    cache = PromptCache(1000)
    cache.add([1, 2, 3], state(10))
    assert cache.longest_prefix([5, 6]) == (None, 0)


def test_an_entry_is_dropped_when_a_longer_one_extends_it() -> None:
    cache = PromptCache(1000)
    cache.add([1, 2], state(10))
    cache.add([1, 2, 3], state(10))
    assert len(cache) == 1 and cache.size == 10
    assert cache.holds([1, 2]) and cache.holds([1, 2, 3]) and not cache.holds([1, 2, 3, 4])


def test_the_least_recently_used_entry_goes_first_to_stay_within_the_limit() -> None:
    cache = PromptCache(30)
    cache.add([1], state(10))
    cache.add([2], state(10))
    cache.add([3], state(10))
    old, _ = cache.longest_prefix([1])
    assert old is not None
    cache.used(old, 1)  # [1] is now the most recently used: [2] goes next
    cache.add([4], state(10))
    assert cache.size <= 30
    assert cache.longest_prefix([2]) == (None, 0)
    assert cache.longest_prefix([1])[1] == 1 and cache.longest_prefix([4])[1] == 1


def test_an_entry_larger_than_the_whole_limit_is_refused() -> None:
    cache = PromptCache(30)
    cache.add([1], state(10))
    assert not cache.add([2], state(31))
    assert len(cache) == 1


def test_a_conversation_extends_its_own_earlier_turns_but_not_another() -> None:
    assert extends([1, 2, 3, 4], [1, 2, 3])
    assert extends([1, 2, 3], [1, 2, 3])
    assert not extends([1, 2], [1, 2, 3])
    assert not extends([1, 2, 9, 4], [1, 2, 3])
