"""Speculative decoding on the real models: an edit whose answer repeats its prompt, the prompt
a model's chat template makes of it, and plain greedy decoding with each choice's margin."""

from __future__ import annotations

import llama_cpp as ll
import numpy as np

from localserve.backends.llama_cpp import LlamaCppBackend
from localserve.engine.batching.scheduler import Scheduler
from localserve.engine.batching.sequence import Sequence
from localserve.engine.workers.chat_template import ChatTemplate
from localserve.ground.sampling import SamplingParams
from localserve.ground.step import StepChunk, StepPlan

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


def answer(s: Scheduler, prompt: list[int], drafts: int) -> list[int]:
    seq = Sequence(prompt, SamplingParams(temperature=0, draft_tokens=drafts), ANSWER_TOKENS)
    s.submit(seq)
    while seq.finish_reason is None:
        s.step()
    return seq.generated
