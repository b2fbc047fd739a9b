"""How an ONNX row picks its token from its logits (backends/onnx_sampling.py): llama.cpp's
sampler chain, in numpy, one sequence at a time."""

from __future__ import annotations

import numpy as np

from localserve.backends.onnx_sampling import RowSampler
from localserve.ground.sampling import SamplingParams

EOS = 0


def logits(*values: float) -> np.ndarray:
    return np.asarray(values, dtype=np.float32)


def sampler(prompt: list[int] | None = None, **params: object) -> RowSampler:
    return RowSampler(SamplingParams(**params), prompt or [], frozenset({EOS}), 256)  # type: ignore[arg-type]


def draws(s: RowSampler, row: np.ndarray, n: int = 200) -> set[int]:
    return {s.pick(row.copy()) for _ in range(n)}


def test_greedy_picks_the_highest_logit() -> None:
    assert sampler(temperature=0).pick(logits(0, 1, 5, 2)) == 2


def test_a_repeat_penalty_turns_greedy_away_from_a_token_in_the_prompt() -> None:
    s = sampler([2], temperature=0, repeat_penalty=2.0)
    assert s.pick(logits(0, 3, 5, 2)) == 1


def test_a_repeat_penalty_counts_the_tokens_the_row_generated() -> None:
    s = sampler([3], temperature=0, repeat_penalty=2.0, penalty_last_n=4)
    assert s.pick(logits(0, 4, 5, 1)) == 2
    assert s.pick(logits(0, 4, 5, 1)) == 1, "2 was just generated"


def test_penalties_look_back_only_over_penalty_last_n_tokens() -> None:
    s = sampler([2, 1, 1, 1], temperature=0, repeat_penalty=2.0, penalty_last_n=3)
    assert s.pick(logits(0, 1, 5, 2)) == 2


def test_presence_and_frequency_penalties_subtract_from_seen_tokens() -> None:
    s = sampler([2, 2], temperature=0, presence_penalty=1.0, frequency_penalty=1.0)
    assert s.pick(logits(0, 0, 5, 3)) == 3  # 5 - 1 - 2 * 1 = 2 < 3


def test_the_same_seed_draws_the_same_tokens() -> None:
    row = logits(*np.linspace(0, 1, 50))
    first, second = (sampler(temperature=1.0, top_k=0, min_p=0.0, seed=7) for _ in range(2))
    assert [first.pick(row.copy()) for _ in range(20)] == [
        second.pick(row.copy()) for _ in range(20)
    ]


def test_top_k_one_draws_the_best_token_at_any_temperature() -> None:
    assert draws(sampler(temperature=5.0, top_k=1), logits(0, 1, 3, 2)) == {2}


def test_top_p_keeps_the_head_whose_mass_reaches_it() -> None:
    row = np.log(logits(0.05, 0.5, 0.3, 0.15))
    assert draws(sampler(temperature=1.0, top_k=0, top_p=0.7, min_p=0.0), row) == {1, 2}


def test_min_p_drops_tokens_far_less_likely_than_the_best() -> None:
    row = np.log(logits(0.01, 0.6, 0.39))
    assert draws(sampler(temperature=1.0, top_k=0, top_p=1.0, min_p=0.1), row) == {1, 2}


def test_ignore_eos_never_draws_the_end_of_generation_token() -> None:
    assert sampler(temperature=0, ignore_eos=True).pick(logits(9, 1, 2)) == 2


def test_a_request_naming_no_min_p_samples_with_the_servers_default() -> None:
    # exp(-4) is ~0.018 of the best: below the default 0.05, so token 1 is never drawn.
    s = sampler(temperature=1.0, top_k=0, top_p=1.0)
    assert draws(s, logits(-50, -4, 0, -50)) == {2}
