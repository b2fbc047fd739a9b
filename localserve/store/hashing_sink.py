"""Writing a download to disk while another thread hashes it.

sha256 runs at about 700 MB/s here, about as fast as loopback delivers bytes: hashing on the
thread that reads the socket would halve a pull's speed. hashlib releases the GIL on large
buffers, so a second thread hashes each chunk while the first reads and writes the next. A
small ring of reusable buffers bounds the memory and keeps the two in step.
"""

from __future__ import annotations

import hashlib
import os
import queue
import threading

BUFFER = 1 << 20
RING = 8


class HashingSink:
    def __init__(self, fd: int, hasher: hashlib._Hash) -> None:
        self._fd = fd
        self._hasher = hasher
        self._free: queue.Queue[bytearray] = queue.Queue()
        for _ in range(RING):
            self._free.put(bytearray(BUFFER))
        self._full: queue.Queue[tuple[bytearray, int] | None] = queue.Queue()
        self._thread = threading.Thread(target=self._hash, name="pull-hash", daemon=True)
        self._thread.start()

    def _hash(self) -> None:
        while (item := self._full.get()) is not None:
            buf, n = item
            self._hasher.update(memoryview(buf)[:n])
            self._free.put(buf)

    def buffer(self) -> bytearray:
        """A buffer to read the next chunk into (waits while the hasher is behind)."""
        return self._free.get()

    def commit(self, buf: bytearray, n: int) -> None:
        """Write the chunk now; it is hashed on the other thread, then the buffer is reused."""
        view = memoryview(buf)[:n]
        while view:
            view = view[os.write(self._fd, view) :]
        self._full.put((buf, n))

    def discard(self, buf: bytearray) -> None:
        self._free.put(buf)

    def close(self) -> str:
        """Wait for the hasher to catch up; the hex sha256 of everything hashed."""
        self._full.put(None)
        self._thread.join()
        return self._hasher.hexdigest()
