"""No ask of one client holds the worker's main thread from another's (issue #57,
engine/worker_process/slow_asks.py): a long text is tokenized on a slow thread while a short
one is answered at once; a prompt that cannot fit is refused before it is tokenized or its
grammar compiled; a cancel that comes before its slow submit has queued leaves nothing queued;
and an unload waits for a tokenizing that still reads the model's vocabulary.

The worker runs here without a socket or a model: a fake backend whose tokenizing of a text
that starts "slow" waits for the test to let it go, so every assertion is about order."""

from __future__ import annotations

import threading
from dataclasses import replace
from typing import Any

import pytest

from localserve.engine.worker_process.main import ResidentBatcher, Worker
from localserve.engine.worker_process.runtimes import Built
from localserve.engine.worker_process.slow_asks import SLOW_TEXT_CHARS, may_take_long
from localserve.ground import messages as m
from localserve.ground.model import ModelInfo
from localserve.ground.sampling import Grammar, SamplingParams
from localserve.ground.settings import Settings
from localserve.ground.token_floor import TokenFloor

N_CTX = 64
# Long texts, so slow asks; the fake makes a token of each word: this one is a single token.
SLOW = "slow" + " " * SLOW_TEXT_CHARS


class Conn:
    """The daemon's end: the replies as they come."""

    def __init__(self) -> None:
        self.replies: dict[int, m.Reply] = {}
        self._came = threading.Condition()

    def send(self, message: Any) -> None:
        if isinstance(message, m.Reply):
            with self._came:
                self.replies[message.ref] = message
                self._came.notify_all()

    def reply(self, ref: int) -> m.Reply:
        with self._came:
            assert self._came.wait_for(lambda: ref in self.replies, timeout=30)
            return self.replies[ref]


class Backend:
    def __init__(self) -> None:
        self.info = ModelInfo("m", "m.gguf", "gguf", 1, N_CTX, N_CTX, 0, None, "", "", False)
        self.gate = threading.Event()
        self.tokenizing = threading.Event()
        self.tokenized: list[str] = []
        self.compiled = 0
        self.closed = False

    def tokenize(self, text: str, add_special: bool) -> list[int]:
        if text.startswith("slow"):
            self.tokenizing.set()
            assert self.gate.wait(timeout=30)
        self.tokenized.append(text[:4])
        return [1] * len(text.split())

    def check_sampling(self, params: SamplingParams) -> None:
        self.compiled += params.grammar is not None

    def close(self) -> None:
        self.closed = True


class Batcher:
    def __init__(self) -> None:
        self.queued: list[int] = []

    def attach(self, wake: Any) -> None:
        pass

    def submit(self, seq: Any, prompt_field: str = "prompt") -> None:
        self.queued.append(seq.id)

    def cancel(self, request: Any) -> None:
        pass


@pytest.fixture
def worker() -> Worker:
    worker = Worker("cpu", Settings(), Conn())  # type: ignore[arg-type]
    built = Built(Backend(), Batcher(), {})  # type: ignore[arg-type]
    worker.models["m"] = ResidentBatcher(worker, "m", built)
    return worker


def parts(worker: Worker) -> tuple[Conn, Backend, Batcher]:
    built = worker.models["m"].built
    return worker.conn, built.backend, built.batcher  # type: ignore[return-value]


def submit(ref: int, seq: int, text: str, grammar: Grammar | None = None) -> m.Submit:
    return m.Submit(ref, "m", seq, SamplingParams(grammar=grammar), "messages", text=text)


def test_which_asks_are_slow() -> None:
    assert may_take_long(m.Tokenize(1, "m", ["x" * (SLOW_TEXT_CHARS + 1)], True))
    assert not may_take_long(m.Tokenize(1, "m", ["x" * 100] * 3, True))
    assert may_take_long(submit(1, 1, "Hi", Grammar("lark", "start: /a/", "tools")))
    assert not may_take_long(submit(1, 1, "Hi"))
    assert not may_take_long(m.Embed(1, "m", 1, [[1, 2]]))


def test_a_long_tokenizing_holds_no_short_ask(worker: Worker) -> None:
    conn, backend, batcher = parts(worker)
    worker.handle(submit(1, 7, SLOW))
    assert backend.tokenizing.wait(timeout=30)
    worker.handle(m.Tokenize(2, "m", ["a quick one"], True))
    worker.handle(submit(3, 8, "another quick one"))
    assert sorted(conn.replies) == [2, 3] and batcher.queued == [8]
    backend.gate.set()
    assert conn.reply(1).error is None and batcher.queued == [8, 7]


def test_a_prompt_past_the_context_by_its_floor_is_never_tokenized(worker: Worker) -> None:
    conn, backend, batcher = parts(worker)
    backend.info = replace(backend.info, token_floor=TokenFloor(4))
    worker.handle(submit(1, 7, "x" * 4 * N_CTX))
    error = conn.reply(1).error
    assert error is not None and error.kind == "ContextOverflow" and error.param == "messages"
    assert "at least 64 tokens" in error.message
    assert backend.tokenized == [] and batcher.queued == []


def test_a_prompt_past_the_context_compiles_no_grammar(worker: Worker) -> None:
    conn, backend, batcher = parts(worker)
    too_long = " ".join(["w"] * N_CTX)  # 64 tokens: no room for the first new one
    worker.handle(submit(1, 7, too_long, Grammar("lark", "start: /a/", "tools")))
    error = conn.reply(1).error
    assert error is not None and error.kind == "ContextOverflow"
    assert backend.tokenized == ["w w "] and backend.compiled == 0 and batcher.queued == []


def test_a_cancel_before_a_slow_submit_queued_leaves_nothing_queued(worker: Worker) -> None:
    conn, backend, batcher = parts(worker)
    worker.handle(submit(1, 7, SLOW))
    assert backend.tokenizing.wait(timeout=30)
    worker.handle(m.Cancel("m", seq=7))  # the client left while its prompt was tokenized
    backend.gate.set()
    error = conn.reply(1).error
    assert error is not None and error.kind == "EngineError" and batcher.queued == []
    worker.handle(submit(2, 7, SLOW))  # the same ids again: no cancel is left over
    assert conn.reply(2).error is None and batcher.queued == [7]


def test_an_unload_waits_for_a_tokenizing_that_reads_the_vocabulary(worker: Worker) -> None:
    conn, backend, _ = parts(worker)
    worker.handle(m.Tokenize(1, "m", [SLOW], True))
    assert backend.tokenizing.wait(timeout=30)
    unload = threading.Thread(target=worker._unload, args=("m", threading.Event()))
    unload.start()
    while "m" in worker.models:
        threading.Event().wait(0.01)
    with worker._lock:  # taken only once the unload waits, having let it go
        assert not backend.closed
    backend.gate.set()
    unload.join(timeout=30)
    assert conn.reply(1).error is None and backend.closed
    worker.handle(m.Tokenize(2, "m", ["after"], True))
    assert conn.reply(2).error is not None and conn.reply(2).error.kind == "ModelNotFound"
