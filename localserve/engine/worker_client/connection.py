"""The daemon's end of one engine worker: the process, its socket, and the asks in flight.

A reader thread takes the worker's frames: a `Reply` completes the ask that waits for it; a
`Step` or `Embedded` goes to the event loop in one callback. When the socket closes, the worker
is dead: every ask in flight fails with EngineStopped naming the signal or exit code, and
`on_exit` tells the loader, which ends the requests of that device and drops its models.
"""

from __future__ import annotations

import concurrent.futures
import itertools
import logging
import os
import signal
import socket
import subprocess
import sys
import threading
from collections import Counter
from collections.abc import Callable
from typing import Any

import msgspec

from localserve.engine.worker_client.sender import Sender
from localserve.ground import errors
from localserve.ground import messages as m
from localserve.ground.errors import EngineStopped
from localserve.ground.settings import Settings
from localserve_native.remedy import python_path

log = logging.getLogger(__name__)

_SIGNAL_WORDS = {
    "SIGILL": "illegal instruction",
    "SIGSEGV": "segmentation fault",
    "SIGABRT": "abort",
    "SIGKILL": "killed",
    "SIGBUS": "bus error",
    "SIGFPE": "arithmetic fault",
}
# How long a worker that was asked to stop may take before it is killed.
STOP_GRACE_S = 10.0


def describe_exit(returncode: int | None) -> str:
    """`signal SIGILL (illegal instruction)`, `exit code 1`: how a worker ended, in words."""
    if returncode is None:
        return "it stopped answering"
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            return f"signal {-returncode}"
        words = _SIGNAL_WORDS.get(name)
        return f"signal {name}" + (f" ({words})" if words else "")
    return f"exit code {returncode}"


def rebuild(failure: m.Failure) -> Exception:
    """The worker's error as the same kind of error here, so that the faces map it as before."""
    cls = getattr(errors, failure.kind, None)
    if not (isinstance(cls, type) and issubclass(cls, errors.EngineError)):
        return errors.EngineError(failure.message)
    exc = cls.__new__(cls)
    Exception.__init__(exc, failure.message)
    exc.param = failure.param  # type: ignore[attr-defined]
    for key, value in failure.extra.items():
        setattr(exc, key, value)
    return exc


class WorkerProcess:
    """One running engine worker. `ask` blocks (call it off the event loop); `tell` does not."""

    def __init__(
        self,
        device: str,
        settings: Settings,
        on_message: Callable[[m.Step | m.Embedded], None],
        on_exit: Callable[[WorkerProcess, str], None],
        env: dict[str, str] | None = None,
        sent: Counter[str] | None = None,
    ) -> None:
        self.device = device
        # The messages sent to it, by kind (its device's, across restarts): what /metrics
        # counts, and how a test sees that a chat request is one round trip.
        self.sent: Counter[str] = sent if sent is not None else Counter()
        self._on_message = on_message
        self._on_exit = on_exit
        ours, theirs = socket.socketpair()
        self._sock = ours
        cmd = [
            sys.executable,
            "-m",
            "localserve.engine.worker_process.main",
            "--device",
            device,
            "--fd",
            str(theirs.fileno()),
            "--settings",
            msgspec.json.encode(settings).decode(),
        ]
        # Its own output goes where the daemon's does: the daemon's log.
        self.process = subprocess.Popen(
            cmd, pass_fds=(theirs.fileno(),), stdin=subprocess.DEVNULL, env=env
        )
        theirs.close()
        self.pid = self.process.pid
        self.cause: str | None = None
        self._refs = itertools.count(1)
        self._pending: dict[int, concurrent.futures.Future[Any]] = {}
        self._lock = threading.Lock()
        self._sender = Sender(ours, f"worker-{device}-sender")
        self._encoder = msgspec.msgpack.Encoder()
        self._decoder: msgspec.msgpack.Decoder[m.FromWorker] = msgspec.msgpack.Decoder(m.FromWorker)
        self._reader = threading.Thread(target=self._read, name=f"worker-{device}", daemon=True)
        self._reader.start()

    @property
    def alive(self) -> bool:
        return self.cause is None

    def ask(self, message: Any, timeout: float | None = None) -> Any:
        """Send an ask (its `ref` is filled in here) and wait for its reply's value."""
        return self.send(message).result(timeout)

    def send(self, message: Any) -> concurrent.futures.Future[Any]:
        """Send an ask; the future gets its reply's value, or the error it raised there."""
        future: concurrent.futures.Future[Any] = concurrent.futures.Future()
        with self._lock:
            if self.cause is not None:
                future.set_exception(EngineStopped(self.device, self.cause))
                return future
            message.ref = next(self._refs)
            self._pending[message.ref] = future
        self._write(message)
        return future

    def tell(self, message: Any) -> None:
        """Send a message that wants no answer (a cancel); a dead worker drops it."""
        if self.cause is None:
            self._write(message)

    def stop(self) -> None:
        """Close our end: the worker frees its models and exits; kill it if it lingers."""
        try:
            self._sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        try:
            self.process.wait(timeout=STOP_GRACE_S)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=STOP_GRACE_S)
        self._reader.join(timeout=STOP_GRACE_S)

    def _write(self, message: Any) -> None:
        self.sent[type(message).__name__] += 1
        self._sender.send(m.frame(message, self._encoder))

    def _read(self) -> None:
        try:
            while (message := self._receive()) is not None:
                if isinstance(message, m.Reply):
                    self._settle(message)
                else:
                    self._on_message(message)
        except (OSError, msgspec.DecodeError) as exc:
            log.error("lost the %s engine's socket: %s", self.device, exc)
        self._died()

    def _settle(self, reply: m.Reply) -> None:
        with self._lock:
            future = self._pending.pop(reply.ref, None)
        if future is None or not _claimed(future):
            return
        if reply.error is not None:
            future.set_exception(rebuild(reply.error))
        else:
            future.set_result(reply.value)

    def _died(self) -> None:
        try:
            returncode = self.process.wait(timeout=STOP_GRACE_S)
        except subprocess.TimeoutExpired:
            self.process.kill()
            returncode = self.process.wait()
        cause = describe_exit(returncode)
        with self._lock:
            self.cause = cause
            pending, self._pending = self._pending, {}
        self._sock.close()
        for future in pending.values():
            if _claimed(future):
                future.set_exception(EngineStopped(self.device, cause))
        self._on_exit(self, cause)

    def _receive(self) -> m.FromWorker | None:
        return m.read_frame(self._sock, self._decoder)


def _claimed(future: concurrent.futures.Future[Any]) -> bool:
    """Whether the answer may still be set: not when the asker gave up (a client that left
    cancels the future `asyncio.wrap_future` awaited). Claimed at once, so that no cancel
    comes between the check and the answer; setting a cancelled future's answer raises, and
    raised in the reader thread, that ended the thread, and no reply was read again."""
    return future.set_running_or_notify_cancel()


def worker_env(build: str = "") -> dict[str, str]:
    """The daemon's environment for a worker: the same, with output unbuffered so that the
    last lines before a fault reach the log; with a `build`, its llama.cpp shadows the venv's
    (native/remedy.py)."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    if build:
        env["PYTHONPATH"] = python_path(build, env.get("PYTHONPATH"))
    return env
