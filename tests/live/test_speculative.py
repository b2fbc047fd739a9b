"""Prompt-lookup drafts on the real models, without a daemon: the scheduler verifies them in the
step and rolls back what the model rejects, so a greedy answer is the one plain decoding gives,
up to the kernels' arithmetic.

llama.cpp 0.3.36's CPU kernels do not compute a sequence's row alike when the step holds one
token of it (a decode) and when it holds several (a draft's verify): measured here, the same
token's logits differ by up to about 1 for SmolLM2 past 256 cells and up to 2 for Gemma 3 at
60. So a drafted answer may leave the plain one where the model was nearly undecided between two
tokens, and only there (docs/architecture.md, "Speculative decoding").
"""

from __future__ import annotations

from collections.abc import Iterator

import llama_cpp as ll
import numpy as np
import pytest

from localserve.backends.llama_cpp import LlamaCppBackend, LlamaCppOptions
from localserve.engine.batching.scheduler import Scheduler
from localserve.engine.batching.sequence import Sequence
from localserve.engine.workers.chat_template import ChatTemplate
from localserve.ground.sampling import SamplingParams
from localserve.ground.step import StepChunk, StepPlan
from localserve.store.resolve import resolve
from tests.support.residency_support import gemma_file

# An edit: the model copies the function back, so its own text offers drafts.
EDIT = (
    "Here is a Python function:\n\ndef settle(x):\n"
    + "".join(f"    if x > {3 * j}:\n        x = x - {j + 1}\n" for j in range(3))
    + "    return x\n\nReturn it with the variable `x` renamed to `count`. Write only the code."
)
ANSWER_TOKENS = 60
DRAFTS = 6
# The largest logit difference seen between the two ways of computing a row, with room.
NEAR_TIE = 3.0


@pytest.fixture(scope="module", params=["smollm2", "gemma3"])
def backend(request: pytest.FixtureRequest) -> Iterator[LlamaCppBackend]:
    path = resolve("smollm2").path if request.param == "smollm2" else gemma_file()
    options = LlamaCppOptions(
        n_slots=1, n_ctx_slot=512, n_threads=2, n_batch=512, use_extra_bufts=True
    )
    b = LlamaCppBackend(request.param, path, options)
    yield b
    b.close()


def scheduler(backend: LlamaCppBackend) -> Scheduler:
    s = Scheduler(backend, draft_tokens=DRAFTS)
    # Keep the cost model at its prior, where drafts pay: on 2 cores they rarely would, and
    # the answers compared here must have been drafted.
    s.step_cost.record = lambda tokens, seconds: None  # type: ignore[method-assign]
    return s


def answer(s: Scheduler, prompt: list[int], drafts: int) -> list[int]:
    seq = Sequence(prompt, SamplingParams(temperature=0, draft_tokens=drafts), ANSWER_TOKENS)
    s.submit(seq)
    while seq.finish_reason is None:
        s.step()
    return seq.generated


def prompt_of(backend: LlamaCppBackend, text: str) -> list[int]:
    info = backend.info
    template = ChatTemplate(info.chat_template, info.bos_text, info.eos_text, info.architecture)
    rendered = template.render([{"role": "user", "content": text}], add_generation_prompt=True)
    tokens = backend.tokenize(rendered, False)
    assert len(tokens) + 2 * ANSWER_TOKENS + 20 < 256, "the test must stay within 256 cells"
    return tokens


def plain_with_margins(
    backend: LlamaCppBackend, prompt: list[int]
) -> tuple[list[int], list[float]]:
    """Plain greedy decoding, one token a step, with each choice's lead over the runner-up."""
    backend.seq_trim(0, 0)
    backend.seq_start(0, SamplingParams(temperature=0), prompt)
    tokens = backend.step(StepPlan([StepChunk(0, prompt, 0, True)]))
    margins = [lead(backend, 0)]
    while len(tokens) < ANSWER_TOKENS and not backend.is_end_of_generation(tokens[-1]):
        at = len(prompt) + len(tokens) - 1
        tokens += backend.step(StepPlan([StepChunk(0, [tokens[-1]], at, True)]))
        margins.append(lead(backend, 0))
    backend.seq_end(0)
    backend.seq_trim(0, 0)
    return tokens, margins


def last_logits(backend: LlamaCppBackend, row: int = 0) -> np.ndarray:
    """A copy of output row `row` of the step just run."""
    rows = np.ctypeslib.as_array(
        ll.llama_get_logits(backend._ctx), shape=(row + 1, backend.n_vocab)
    )
    return rows[row].copy()


def lead(backend: LlamaCppBackend, row: int) -> float:
    logits = last_logits(backend, row)
    top2 = np.partition(logits, -2)[-2:]
    return float(top2[1] - top2[0])


def test_a_drafted_answer_leaves_the_plain_one_only_at_a_near_tie(
    backend: LlamaCppBackend,
) -> None:
    prompt = prompt_of(backend, EDIT)
    plain, margins = plain_with_margins(backend, prompt)
    s = scheduler(backend)
    drafted = answer(s, prompt, DRAFTS)
    assert s.drafted > 0 and 0 < s.drafts_accepted < s.drafted
    apart = next((i for i, (a, b) in enumerate(zip(plain, drafted)) if a != b), None)
    if apart is None:
        assert drafted == plain
    else:
        assert margins[apart] < NEAR_TIE, f"token {apart} left the plain answer by {margins[apart]}"


def test_rejected_drafts_leave_no_trace_in_the_slot(backend: LlamaCppBackend) -> None:
    """Two verifies of the same shape whose wrong drafts differ leave the same cells: the next
    decode's logits are equal to the last bit."""
    prompt = prompt_of(backend, EDIT)
    plain, _ = plain_with_margins(backend, prompt)
    first, right = plain[0], plain[1]
    after: list[np.ndarray] = []
    for wrong in ([7, 8, 9], [100, 200, 300]):
        backend.seq_trim(0, 0)
        backend.seq_start(0, SamplingParams(temperature=0), prompt)
        backend.step(StepPlan([StepChunk(0, prompt, 0, True)]))
        at = len(prompt)
        picks = backend.step(StepPlan([StepChunk(0, [first, right, *wrong], at, True, 4)]))
        assert picks[0] == right and picks[1] != wrong[0]
        assert backend.seq_trim(0, at + 2)  # keep `first` and `right`
        backend.step(StepPlan([StepChunk(0, [picks[1]], at + 2, True)]))
        after.append(last_logits(backend))
        backend.seq_end(0)
    backend.seq_trim(0, 0)
    assert np.array_equal(after[0], after[1])


SAMPLED = SamplingParams(temperature=1.0, top_k=40, top_p=1.0, min_p=0.0)
OPEN = "Tell me a story."  # an open request: the model is unsure of its first word
TRIALS = 200


def test_a_sampled_answer_drafts_and_keeps_some_of_its_drafts(backend: LlamaCppBackend) -> None:
    s = scheduler(backend)
    seq = Sequence(prompt_of(backend, EDIT), SamplingParams(temperature=0.3), ANSWER_TOKENS)
    s.submit(seq)
    while seq.finish_reason is None:
        s.step()
    assert s.drafted > 0 and 0 < s.drafts_accepted <= s.drafted
    assert len(seq.generated) == ANSWER_TOKENS or seq.finish_reason == "stop"


def test_a_sampled_sequences_draft_is_kept_with_its_probability(backend: LlamaCppBackend) -> None:
    """The same verify, run again and again: its draft stays about as often as the model's
    top-40 distribution at temperature 1 gives it, and a replacement is one of those 40."""
    prompt = prompt_of(backend, OPEN)
    last, at = prompt[-1], len(prompt) - 1
    backend.seq_trim(0, 0)
    backend.seq_start(0, SAMPLED, prompt)
    backend.step(StepPlan([StepChunk(0, prompt[:-1], 0, False)]))
    backend.step(StepPlan([StepChunk(0, [last], at, True)]))
    top, chance = top_40(last_logits(backend))
    draft = int(top[np.abs(chance - 0.5).argmin()])  # the answer's likeliest first word, unsure
    kept, chances = 0, []
    for _ in range(TRIALS):
        assert backend.seq_trim(0, at)
        picks = backend.step(StepPlan([StepChunk(0, [last, draft], at, True, 1)]))
        top, chance = top_40(last_logits(backend, 0))
        chances.append(float(chance[top == draft].sum()))
        kept += picks[0] == draft
        assert picks[0] == draft or (picks[0] in top and picks[1] == -1)
    backend.seq_end(0)
    backend.seq_trim(0, 0)
    p = float(np.mean(chances))
    assert 0.05 < p < 0.95, "the draft must be neither sure nor absent for this test to mean much"
    assert abs(kept / TRIALS - p) < 4 * (p * (1 - p) / TRIALS) ** 0.5 + 0.02, (kept, p)


def top_40(logits: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """SAMPLED's candidates and their chances: the 40 likeliest tokens at temperature 1."""
    top = np.argsort(logits)[-SAMPLED.top_k :]
    weights = np.exp(logits[top] - logits[top].max())
    return top, weights / weights.sum()
