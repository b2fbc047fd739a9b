"""Drafted tokens of sampled GGUF sequences, judged by speculative sampling's rule.

A greedy sequence's drafts are checked by the scheduler against the model's argmax. A sampled
one's cannot be: the token the model writes is a draw. So for each drafted row the backend asks
this judge for the token to write there: the draft, kept with its probability under the
sequence's own top-k, top-p, min-p and temperature, or a draw from the rest of that
distribution (draft_rule.py). The scheduler then keeps the drafts up to the first one replaced,
as for greedy ones, and the answer is distributed as plain sampling's.

The draws use this judge's generator, not the chain's seeded one; a seeded sequence does not
draft (SamplingParams.can_draft).
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable

import llama_cpp as ll
import numpy as np

from localserve.backends.draft_rule import judge_draft
from localserve.backends.llama_sampler import candidates_chain
from localserve.ground.sampling import SamplingParams

_TOKEN_DATA = np.dtype([("id", "<i4"), ("logit", "<f4"), ("p", "<f4")])
assert _TOKEN_DATA.itemsize == ctypes.sizeof(ll.llama_token_data)


class DraftJudges:
    """Per slot that samples and may draft, its candidates chain (its sampler without the draw)."""

    def __init__(self, n_vocab: int) -> None:
        self._n_vocab = n_vocab
        self._chains: dict[int, ll.llama_sampler_p] = {}
        # This step's output rows that a judged draft follows: batch index -> that draft.
        self._drafts: dict[int, int] = {}
        self._rng = np.random.default_rng()
        self._ids = np.arange(n_vocab, dtype=np.int32)
        # llama.cpp's candidate list, over the whole vocabulary, reused for every row.
        self._cands = np.zeros(n_vocab, dtype=_TOKEN_DATA)
        self._array = ll.llama_token_data_array(
            data=self._cands.ctypes.data_as(ctypes.POINTER(ll.llama_token_data)),
            size=n_vocab,
            selected=-1,
            sorted=False,
        )

    def start(self, slot: int, params: SamplingParams) -> None:
        if params.can_draft and not params.greedy:
            self._chains[slot] = candidates_chain(params)

    def end(self, slot: int) -> None:
        chain = self._chains.pop(slot, None)
        if chain is not None:
            ll.llama_sampler_free(chain)

    def clear(self) -> None:
        """A new step: no drafted rows yet."""
        self._drafts.clear()

    def drafted(self, slot: int, first: int, drafts: list[int]) -> None:
        """`slot`'s `drafts` follow its output rows at batch indexes `first`, `first` + 1, ..."""
        if slot in self._chains:
            self._drafts.update(zip(range(first, first + len(drafts)), drafts))

    @property
    def pending(self) -> bool:
        return bool(self._drafts)

    def sample(
        self,
        sample_at: list[tuple[int, int]],
        rows: np.ndarray,
        plain: Callable[[int, int, int], int],
    ) -> list[int]:
        """The step's tokens, one per (slot, batch index) of `sample_at`: a drafted row's is
        judged, until one replaces its draft (the scheduler reads none of that sequence's rows
        after it, so they get -1); every other row's is `plain(row, slot, batch index)`."""
        replaced: set[int] = set()
        tokens: list[int] = []
        for row, (slot, i) in enumerate(sample_at):
            if slot in replaced:
                tokens.append(-1)
            elif (draft := self._drafts.get(i)) is not None:
                token = self.judge(slot, rows[row], draft)
                if token != draft:
                    replaced.add(slot)
                tokens.append(token)
            else:
                tokens.append(plain(row, slot, i))
        return tokens

    def judge(self, slot: int, logits: np.ndarray, draft: int) -> int:
        """The token `slot` writes where `draft` was proposed, given that row's `logits`."""
        cands = self._cands
        cands["id"] = self._ids  # llama.cpp's samplers reorder the list in place
        cands["logit"] = logits
        self._array.size = self._n_vocab
        self._array.selected = -1
        self._array.sorted = False
        ll.llama_sampler_apply(self._chains[slot], ctypes.byref(self._array))
        kept = cands[: self._array.size]
        scaled = kept["logit"].astype(np.float64)
        probs = np.exp(scaled - scaled.max())
        return judge_draft(kept["id"], probs / probs.sum(), draft, self._rng)

    def close(self) -> None:
        for slot in list(self._chains):
            self.end(slot)
