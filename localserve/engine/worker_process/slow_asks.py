"""Which of the daemon's asks may take long, answered on a few threads of their own so that the
worker's main thread goes on answering every other client's (issue #57).

The main thread reads the asks in order and answered each before reading the next. Two kinds
can take seconds: tokenizing a long text (linear, but 1 MiB of spaces took 2.7 s on SmolLM2),
and compiling a submit's grammar against the vocabulary (a lenient schema of 64 KiB, 1.6 to 7
s). Meanwhile every other client's tokenize and submit waited: their TTFT went 14 to 40 times
quiet. A prompt that cannot fit is refused before either (the token floor and the context
check in `Worker._submit`), but a long text that fits, or is cut to a window by Ollama's faces,
is still read whole, and a grammar that fits is still compiled.

So an ask that `may_take_long` is answered on one of THREADS threads, and the rest stay on the
main thread, in the order sent, as before. Replies go by `ref`, so a slow ask's reply may come
after later asks' at no cost to the daemon. Two slow asks still delay a third slow one, but
never a quick one.

A submit answered on a pool thread may see its client's cancel before it has queued its
sequence: the worker keeps such a cancel (`Worker._cancel`) and the submit then queues nothing.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable

from localserve.ground import messages as m

# Texts longer than this (characters, of an ask's texts together) are tokenized off the main
# thread: at most ~60 ms of the slowest text measured (spaces), milliseconds of prose.
SLOW_TEXT_CHARS = 16 << 10
# Two: one pathological ask leaves a thread for the next.
THREADS = 2


def may_take_long(message: m.ToWorker) -> bool:
    """Whether `message` is an ask to answer off the main thread: a long text to tokenize, or a
    submit with a grammar (compiled at its first use, for as long as the grammar makes it)."""
    if isinstance(message, m.Tokenize):
        return sum(map(len, message.texts)) > SLOW_TEXT_CHARS
    if isinstance(message, m.Submit):
        return len(message.text) > SLOW_TEXT_CHARS or message.params.grammar is not None
    return False


class SlowLane:
    """THREADS threads that answer the slow asks in turn. Daemon threads, as the loads' are: a
    worker whose daemon is gone exits at once, not after a tokenizing in progress."""

    def __init__(self, threads: int = THREADS) -> None:
        self._jobs: queue.SimpleQueue[Callable[[], None]] = queue.SimpleQueue()
        for i in range(threads):
            threading.Thread(target=self._run, name=f"slow-ask-{i}", daemon=True).start()
        # (model, seq) of the submits handed to a thread and not queued yet, and those of them
        # whose cancel came first; kept under the worker's lock, as its sequences are.
        self.submitting: set[tuple[str, int]] = set()
        self.cancelled_early: set[tuple[str, int]] = set()

    def cancel_early(self, key: tuple[str, int]) -> None:
        """A cancel that found no queued sequence: kept when its submit is still on a thread."""
        if key in self.submitting:
            self.cancelled_early.add(key)

    def done(self, key: tuple[str, int]) -> None:
        """A submit answered, queued or not: a cancel after this finds its sequence, or none."""
        self.submitting.discard(key)
        self.cancelled_early.discard(key)

    def submit(self, job: Callable[[], None]) -> None:
        """Run `job` on the first free thread; it must raise nothing (Worker._answer)."""
        self._jobs.put(job)

    def _run(self) -> None:
        while True:
            self._jobs.get()()
