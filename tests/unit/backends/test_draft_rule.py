"""Speculative sampling's rule for a draft proposed with certainty: a sampled sequence's answer
stays distributed as plain sampling's (pure logic, on made-up distributions)."""

from __future__ import annotations

from collections import Counter

import numpy as np

from localserve.backends.draft_rule import judge_draft

IDS = np.array([7, 3, 9, 4])
PROBS = np.array([0.5, 0.3, 0.15, 0.05])


def test_a_draft_the_model_is_sure_of_is_always_kept() -> None:
    rng = np.random.default_rng(1)
    sure = np.array([1.0, 0.0, 0.0, 0.0])
    assert all(judge_draft(IDS, sure, 7, rng) == 7 for _ in range(200))


def test_a_draft_outside_the_candidates_is_replaced_by_one_of_them() -> None:
    rng = np.random.default_rng(2)
    written = {judge_draft(IDS, PROBS, 1234, rng) for _ in range(500)}
    assert written <= set(IDS.tolist()) and len(written) > 1


def test_a_rejected_draft_is_never_written_again_in_its_place() -> None:
    rng = np.random.default_rng(3)
    nearly_never = np.array([0.001, 0.5, 0.3, 0.199])
    written = [judge_draft(IDS, nearly_never, 7, rng) for _ in range(2000)]
    assert written.count(7) < 20  # about 2: kept with its probability, never redrawn


def test_every_token_is_written_with_the_models_probability_whatever_was_drafted() -> None:
    rng = np.random.default_rng(4)
    n = 40_000
    for draft in (7, 4, 1234):
        counts = Counter(judge_draft(IDS, PROBS, draft, rng) for _ in range(n))
        freqs = np.array([counts[int(t)] / n for t in IDS])
        assert np.abs(freqs - PROBS).max() < 0.01, (draft, freqs)
