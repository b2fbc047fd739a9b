"""How many leading tokens two token lists share: what a cached prefix saves from prefill."""

from __future__ import annotations


def common_prefix(a: list[int], b: list[int]) -> int:
    """The length of the longest common prefix of `a` and `b`.

    Bisects with slice comparisons, which run in C: cache lookups compare every new prompt with
    every slot and every saved prompt, and a token-by-token Python loop made that the slow part.
    """
    n = min(len(a), len(b))
    if a[:n] == b[:n]:
        return n
    lo, hi = 0, n  # a[:lo] == b[:lo] and a[:hi] != b[:hi]
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if a[:mid] == b[:mid]:
            lo = mid
        else:
            hi = mid
    return lo


def extends(tokens: list[int], prefix: list[int]) -> bool:
    """Whether `tokens` starts with all of `prefix`: a saved entry of `prefix` adds nothing to
    one of `tokens`, so a cache keeps the longer one only."""
    return len(tokens) >= len(prefix) and tokens[: len(prefix)] == prefix
