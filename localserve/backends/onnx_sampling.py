"""How one ONNX row picks its next token from its logits: llama.cpp's sampler chain in numpy.

Rows batched by our own KV cache (backends/onnx_rows.py) come back as raw logits, one row per
sequence, so each sequence samples by itself, in the order llama.cpp's server builds its chain
(backends/llama_sampler.py): penalties over the last `penalty_last_n` tokens (the prompt's tail
included), then greedy, or top-k, top-p, min-p, temperature and a draw from the sequence's own
random stream. A seeded sequence draws from a generator of its seed alone, so its answer does
not depend on what else shares its batch. Logit bias, grammars and the infill sampler are not
here: ONNX requests that ask for them are refused before they reach a row.
"""

from __future__ import annotations

from collections import deque

import numpy as np

from localserve.ground.sampling import SamplingParams


class RowSampler:
    """One sequence's sampler: its parameters, its recent tokens and its random stream."""

    def __init__(
        self, params: SamplingParams, prompt: list[int], eos_ids: frozenset[int], n_ctx: int
    ) -> None:
        self.params = params
        last_n = params.penalty_last_n if params.penalty_last_n >= 0 else n_ctx
        self._window: deque[int] | None = None
        if params.has_penalties and last_n > 0:
            self._window = deque(prompt[-last_n:], maxlen=last_n)
        # ignore_eos asks for max_tokens tokens: an end-of-generation token is never drawn.
        self._banned = np.asarray(sorted(eos_ids), dtype=np.int64) if params.ignore_eos else None
        self._rng = np.random.default_rng(None if params.seed is None else params.seed)

    def pick(self, logits: np.ndarray) -> int:
        """The next token from one row of logits (float, n_vocab); the row may be modified."""
        p = self.params
        logits = logits.astype(np.float32, copy=False)
        if self._banned is not None:
            logits[self._banned[self._banned < logits.shape[0]]] = -np.inf
        if self._window:
            self._penalize(logits)
        if p.greedy:
            token = int(np.argmax(logits))
        else:
            token = self._draw(logits)
        if self._window is not None:
            self._window.append(token)
        return token

    def _penalize(self, logits: np.ndarray) -> None:
        p = self.params
        assert self._window is not None
        tokens, counts = np.unique(np.fromiter(self._window, dtype=np.int64), return_counts=True)
        values = logits[tokens]
        if p.repeat_penalty != 1.0:
            values = np.where(values <= 0, values * p.repeat_penalty, values / p.repeat_penalty)
        values = values - counts * p.frequency_penalty - (counts > 0) * p.presence_penalty
        logits[tokens] = values

    def _draw(self, logits: np.ndarray) -> int:
        p = self.params
        # Candidates, best first: the top k (or every token), as llama.cpp's top-k leaves them.
        if 0 < p.top_k < logits.shape[0]:
            candidates = np.argpartition(-logits, p.top_k - 1)[: p.top_k]
        else:
            candidates = np.arange(logits.shape[0])
        candidates = candidates[np.argsort(-logits[candidates], kind="stable")]
        values = logits[candidates].astype(np.float64)
        finite = np.isfinite(values)
        candidates, values = candidates[finite], values[finite]
        if candidates.size == 0:
            return int(np.argmax(logits))
        if p.top_p < 1.0:
            probs = _softmax(values)
            # Keep the smallest head whose mass reaches top_p (at least one token).
            keep = int(np.searchsorted(np.cumsum(probs), p.top_p) + 1)
            candidates, values = candidates[:keep], values[:keep]
        min_p = p.min_p_or_default
        if min_p > 0.0:
            # min-p keeps the tokens at least min_p times as likely as the best one.
            keep_mask = values >= values[0] + np.log(min_p)
            candidates, values = candidates[keep_mask], values[keep_mask]
        probs = _softmax(values / max(p.temperature, 1e-6))
        return int(candidates[self._rng.choice(candidates.size, p=probs)])


def _softmax(values: np.ndarray) -> np.ndarray:
    shifted = np.exp(values - values.max())
    total: np.ndarray = shifted / shifted.sum()
    return total
