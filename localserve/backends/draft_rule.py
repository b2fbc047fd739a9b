"""Speculative sampling's acceptance rule for a draft proposed with certainty (prompt lookup).

A sampled sequence may keep a drafted token only in a way that leaves its answer distributed
exactly as plain sampling would. The standard rule (Leviathan et al., Chen et al.) keeps a draft
proposed with probability q(d) when a uniform draw falls under p(d)/q(d), and otherwise samples
from the rest of p. Prompt lookup proposes its draft with certainty (q(d) = 1), so a draft stays
with probability p(d), and a rejected one is replaced by a draw from p without it: every token x
is then written with probability p(x).
"""

from __future__ import annotations

import numpy as np


def judge_draft(ids: np.ndarray, probs: np.ndarray, draft: int, rng: np.random.Generator) -> int:
    """The token written where `draft` was proposed: the draft itself with its probability under
    the model's distribution (`ids` and their `probs`, summing to 1), else a draw from the rest
    of that distribution, which is never the draft."""
    at = np.flatnonzero(ids == draft)
    p_draft = float(probs[at[0]]) if at.size else 0.0
    if rng.random() < p_draft:
        return draft
    rest = probs.astype(np.float64)
    if at.size:
        rest[at[0]] = 0.0
    return int(ids[rng.choice(len(rest), p=rest / rest.sum())])
