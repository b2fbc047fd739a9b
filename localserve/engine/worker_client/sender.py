"""Frames written to an engine worker's socket in order, without holding the event loop.

A small frame (an ask, a cancel) is sent at once on the caller's thread: the socket's buffer
takes it, and a thread's handover would add up to the GIL's switch interval (5 ms) to every
request. A large one (a prompt of megabytes) fills the buffer and waits for the worker to read:
16 MiB held the daemon's event loop about 0.1 s. It goes to a thread of its own, and every frame
after it queues behind it until the queue is empty, so the worker reads them in the order they
were sent.
"""

from __future__ import annotations

import collections
import socket
import threading

INLINE = 256 << 10  # bytes: a frame this small fits the socket's buffer


class Sender:
    def __init__(self, sock: socket.socket, name: str) -> None:
        self._sock = sock
        self._name = name
        self._lock = threading.Lock()
        self._queued: collections.deque[bytes | bytearray] = collections.deque()
        self._writing = False  # a thread is sending the queue

    def send(self, data: bytes | bytearray) -> None:
        """Send `data` after every frame sent before it; a closed socket drops it (the worker's
        reader sees the close and fails what waits)."""
        with self._lock:
            if not self._writing and len(data) <= INLINE:
                _sendall(self._sock, data)
                return
            self._queued.append(data)
            if self._writing:
                return
            self._writing = True
        threading.Thread(target=self._drain, name=self._name, daemon=True).start()

    def _drain(self) -> None:
        while True:
            with self._lock:
                if not self._queued:
                    self._writing = False
                    return
                data = self._queued.popleft()
            _sendall(self._sock, data)


def _sendall(sock: socket.socket, data: bytes | bytearray) -> None:
    try:
        sock.sendall(data)
    except OSError:
        pass
