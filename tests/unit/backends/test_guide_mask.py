"""A grammar's token mask on the logits (backends/guides.py): whichever way it is applied, every
token the mask forbids ends at -inf and every allowed token keeps its logit."""

from __future__ import annotations

import numpy as np
import pytest

from localserve.backends.guides import _Guide


def _guide_with(allowed: np.ndarray) -> _Guide:
    """A guide whose computed mask is `allowed`, without a grammar (the mask is pure logic)."""
    guide = object.__new__(_Guide)
    padded = np.zeros((len(allowed) + 31) // 32 * 32, dtype=bool)
    padded[: len(allowed)] = allowed
    guide._bits = np.packbits(padded, bitorder="little").view(np.int32).copy()
    guide._n_vocab = len(allowed)
    return guide


@pytest.mark.parametrize("share", [0.0005, 0.5, 0.999, 1.0], ids=["few", "half", "most", "all"])
@pytest.mark.parametrize("n_vocab", [49152, 49155], ids=["bytes-even", "ragged"])
def test_the_mask_forbids_exactly_the_tokens_it_does_not_allow(share: float, n_vocab: int) -> None:
    rng = np.random.default_rng(7)
    allowed = rng.random(n_vocab) < share
    logits = rng.standard_normal(n_vocab).astype(np.float32)
    masked = logits.copy()
    _guide_with(allowed).mask(masked)
    assert np.array_equal(masked, np.where(allowed, logits, -np.inf).astype(np.float32))
