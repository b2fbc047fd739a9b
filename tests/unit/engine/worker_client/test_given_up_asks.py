"""An ask its asker gave up on leaves the worker's connection as it was (found by
tests/live/test_fuzz_faces.py, issue #57). A client that left while its submit was in the
worker (a cancelled batch's line) cancelled the future the daemon awaited; the reader thread
then set that future's answer, which raised, and the thread ended: no reply of that worker was
read again, and every later request on its device waited for ever while /health answered. And
the sequence the worker had started for it ran on, holding a slot, with no one to read it.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from types import SimpleNamespace
from typing import Any

from localserve.engine.worker_client.connection import WorkerProcess
from localserve.engine.worker_client.remote import RemoteRunner
from localserve.ground import messages as m
from localserve.ground.errors import EngineStopped
from localserve.ground.sampling import SamplingParams

Future = concurrent.futures.Future


def connection(pending: dict[int, Future[Any]]) -> WorkerProcess:
    """The daemon's end of a worker, its asks in flight `pending`, with no process behind it."""
    worker = WorkerProcess.__new__(WorkerProcess)
    worker.device = "cpu"
    worker._lock = threading.Lock()
    worker._pending = pending
    return worker


def test_a_reply_to_an_ask_given_up_is_dropped_and_the_next_reply_still_read() -> None:
    given_up: Future[Any] = Future()
    waiting: Future[Any] = Future()
    given_up.cancel()
    worker = connection({1: given_up, 2: waiting})
    worker._settle(m.Reply(1, "too late"))
    worker._settle(m.Reply(2, "answer"))
    assert waiting.result(timeout=0) == "answer"


def test_a_worker_that_dies_fails_the_asks_still_waiting_and_tells_the_loader() -> None:
    given_up: Future[Any] = Future()
    waiting: Future[Any] = Future()
    given_up.cancel()
    exits: list[str] = []
    worker = connection({1: given_up, 2: waiting})
    worker.process = SimpleNamespace(wait=lambda timeout=None: -9)  # type: ignore[assignment]
    worker._sock = SimpleNamespace(close=lambda: None)  # type: ignore[assignment]
    worker._on_exit = lambda _, cause: exits.append(cause)
    worker._died()
    assert isinstance(waiting.exception(timeout=0), EngineStopped)
    assert exits == ["signal SIGKILL (killed)"]


class Worker:
    """A worker that takes a submit and never answers it; it notes what it is told."""

    def __init__(self) -> None:
        self.told: list[Any] = []
        self.asked: Future[Any] = Future()

    def send(self, message: Any) -> Future[Any]:
        return self.asked

    def tell(self, message: Any) -> None:
        self.told.append(message)


def test_a_submit_whose_client_left_is_cancelled_in_the_worker() -> None:
    async def leave() -> tuple[Worker, RemoteRunner, int]:
        worker = Worker()
        runner = RemoteRunner(worker, SimpleNamespace(name="m"), 10)  # type: ignore[arg-type]
        task = asyncio.ensure_future(runner.start([1, 2], SamplingParams(), "prompt"))
        await asyncio.sleep(0)
        (seq,) = runner.sequences
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        return worker, runner, seq

    worker, runner, seq = asyncio.run(leave())
    assert worker.told == [m.Cancel("m", seq=seq)]
    assert runner.sequences == {}
