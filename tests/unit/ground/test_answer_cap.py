"""An answer's cap: the asked max_tokens within the room the prompt leaves, never a refusal."""

from __future__ import annotations

from localserve.ground.sampling import SamplingParams


def test_without_a_cap_the_answer_may_fill_the_room_the_prompt_leaves() -> None:
    assert SamplingParams().answer_cap(prompt_len=100, window=512) == 412


def test_a_cap_smaller_than_the_room_is_kept() -> None:
    assert SamplingParams(max_tokens=16).answer_cap(prompt_len=100, window=512) == 16


def test_a_cap_larger_than_the_room_is_cut_to_the_room() -> None:
    assert SamplingParams(max_tokens=32000).answer_cap(prompt_len=100, window=512) == 412


def test_a_prompt_that_fills_the_window_still_leaves_one_token() -> None:
    assert SamplingParams(max_tokens=8).answer_cap(prompt_len=512, window=512) == 1
