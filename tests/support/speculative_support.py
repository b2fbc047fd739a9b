"""Speculative decoding on the real models: an edit whose answer repeats its prompt, the prompt
a model's chat template makes of it, and plain greedy decoding with each choice's margin."""

from __future__ import annotations

import llama_cpp as ll
import numpy as np

from localserve.backends.llama_cpp import LlamaCppBackend
from localserve.engine.batching.scheduler import Scheduler
from localserve.engine.batching.sequence import Sequence
from localserve.formats.chat_template import ChatTemplate
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
# How far below the plain decode's a token's lead over the runner-up may fall when its row is
# computed in a verify instead (`lead_drops`): a drafted answer may leave the plain one only
# where the plain lead was smaller than that. Measured 2026-12-05 (AMD EPYC, 2 threads, EDIT,
# drafts of 1 to 6 at every alignment), the largest drops: SmolLM2 0.59 alone and 0.80 beside
# a second sequence; Gemma 3 0.64 and 0.64 with llama.cpp's extra buffer types (0.85 at drafts
# of 5), 0.78 and 0.77 without. The tests measure again and print what they find; this is the
# largest seen, 0.85, with a sixth more.
NEAR_TIE = 1.0


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


Run = tuple[list[int], list[int], list[float]]  # a prompt, its plain answer and its margins


def lead_drops(backend: LlamaCppBackend, runs: list[Run]) -> list[float]:
    """How much each answer token's lead over the runner-up falls, from the plain decode's
    (`plain_with_margins`) to a verify's: each plain answer is replayed as drafts, of every
    length up to DRAFTS and at every alignment, the runs' chunks in one step (in slots 0, 1,
    ...) as when sequences draft together. Negative where the verify is surer."""
    greedy = SamplingParams(temperature=0)
    drops: list[float] = []
    for k in range(1, DRAFTS + 1):
        for offset in range(k + 1):
            for slot, (prompt, plain, _) in enumerate(runs):
                backend.seq_trim(slot, 0)
                backend.seq_start(slot, greedy, prompt)
                backend.step(StepPlan([StepChunk(slot, prompt + plain[:offset], 0, False)]))
            for at in range(offset, ANSWER_TOKENS, k + 1):
                drops += _verify_drops(backend, runs, at, k)
            for slot in range(len(runs)):
                backend.seq_end(slot)
                backend.seq_trim(slot, 0)
    return drops


def _verify_drops(backend: LlamaCppBackend, runs: list[Run], at: int, k: int) -> list[float]:
    """One verify step of each run's answer tokens from `at`, the k after the first as drafts:
    the drops of the rows that verify a token of the answer."""
    chunks: list[StepChunk] = []
    wanted: list[tuple[int, float] | None] = []  # per output row: its token and plain lead
    for slot, (prompt, plain, margins) in enumerate(runs):
        tokens = plain[at : at + k + 1]
        if len(tokens) < 2:
            continue
        chunks.append(StepChunk(slot, tokens, len(prompt) + at, True, len(tokens) - 1))
        ahead = range(at + 1, at + 1 + len(tokens))
        wanted += [(plain[i], margins[i]) if i < len(plain) else None for i in ahead]
    if not chunks:
        return []
    backend.step(StepPlan(chunks))
    rows = np.ctypeslib.as_array(
        ll.llama_get_logits(backend._ctx), shape=(len(wanted), backend.n_vocab)
    )
    drops = []
    for row, verified in zip(rows, wanted):
        if verified is not None:
            token, margin = verified
            drops.append(margin - float(row[token] - np.delete(row, token).max()))
    return drops


def drops_said(name: str, drops: list[float]) -> str:
    """The measured drops, as the tests print them."""
    d = np.array(drops)
    return (
        f"{name}: {d.size} verified rows; lead drops max {d.max():.3f}, "
        f"99th percentile {np.percentile(d, 99):.3f}, median {np.median(d):.3f}; "
        f"NEAR_TIE {NEAR_TIE}"
    )
