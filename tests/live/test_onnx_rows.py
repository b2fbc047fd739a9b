"""Our own continuous batch of KV rows (backends/onnx_rows.py) on the real ONNX model, without a
daemon: however rows join and leave, each greedy row decodes what it would decode alone."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from localserve.backends.onnx_genai import OnnxGenaiBackend, OnnxOptions
from localserve.ground.sampling import SamplingParams
from tests.support.onnx_model import MODEL_NAME, ensure_model

GREEDY = SamplingParams(temperature=0)
QUESTIONS = [
    "What is the capital of France?",
    "Write a long story about a dragon.",
    "Name three colours.",
    "Tell me about the sea and the boats that sail on it.",
]
N = 12


@pytest.fixture(scope="module")
def backend() -> Iterator[OnnxGenaiBackend]:
    b = OnnxGenaiBackend(MODEL_NAME, str(ensure_model()), OnnxOptions(8, 256, 0))
    yield b
    b.close()


def prompt(b: OnnxGenaiBackend, question: str) -> list[int]:
    return b.tokenize(f"<|im_start|>user\n{question}<|im_end|>\n<|im_start|>assistant\n", False)


def alone(b: OnnxGenaiBackend, question: str) -> list[int]:
    b.new_engine()
    b.begin(1, prompt(b, question), GREEDY, N)
    tokens: list[int] = []
    while len(tokens) < N:
        tokens += [e.token for e in b.run() if e.token is not None]
    b.release(1, cancel=False)
    return tokens


def test_the_model_is_batched_by_our_own_rows_on_the_cpu(backend: OnnxGenaiBackend) -> None:
    assert backend.rows is not None and backend.continuous


def test_rows_joining_at_different_steps_decode_what_each_decodes_alone(
    backend: OnnxGenaiBackend,
) -> None:
    expected = {key: alone(backend, q) for key, q in enumerate(QUESTIONS)}
    backend.new_engine()
    got: dict[int, list[int]] = {key: [] for key in expected}
    for step in range(3 * len(QUESTIONS) + N):
        if step % 3 == 0 and step // 3 < len(QUESTIONS):
            key = step // 3
            backend.begin(key, prompt(backend, QUESTIONS[key]), GREEDY, N)
        for event in backend.run():
            got[event.key].append(event.token)  # type: ignore[arg-type]
            if event.end is not None:
                backend.release(event.key, cancel=False)
    assert got == expected


def test_a_row_that_leaves_early_hands_its_place_over_without_changing_the_others(
    backend: OnnxGenaiBackend,
) -> None:
    expected = {key: alone(backend, q) for key, q in enumerate(QUESTIONS[:3])}
    backend.new_engine()
    for key, question in enumerate(QUESTIONS[:3]):
        backend.begin(key, prompt(backend, question), GREEDY, N)
    got: dict[int, list[int]] = {key: [] for key in expected}
    for step in range(2 * N):
        for event in backend.run():
            got[event.key].append(event.token)  # type: ignore[arg-type]
        if step == 3:
            backend.release(0, cancel=True)  # row 0 leaves; the last prefilled row moves into it
    assert got[1] == expected[1] and got[2] == expected[2]
    assert got[0] == expected[0][: len(got[0])]


def test_rows_leaving_while_prompts_wait_change_no_answer(backend: OnnxGenaiBackend) -> None:
    expected = {key: alone(backend, q) for key, q in enumerate(QUESTIONS)}
    backend.new_engine()
    for key, question in enumerate(QUESTIONS):
        backend.begin(key, prompt(backend, question), GREEDY, N)
    got: dict[int, list[int]] = {key: [] for key in expected}
    for step in range(3 * N):
        for event in backend.run():
            got[event.key].append(event.token)  # type: ignore[arg-type]
        if step == 1:
            backend.release(0, cancel=True)  # prefilled, while 2 and 3 still wait
            backend.release(2, cancel=True)  # waiting: it never starts
    assert got[1] == expected[1] and got[3] == expected[3]
    assert got[2] == []
