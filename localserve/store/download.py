"""One blob from the hub to the store: resumable, verified, moved into place atomically.

Bytes land in `partial/` and are hashed as they arrive (on a second thread: `HashingSink`). A
download cut short (a crash, a `kill -9`, a dropped connection) resumes with an HTTP Range
request from what the partial file holds, re-hashing those bytes first. Only bytes whose sha256
matches reach `blobs/`, by one rename; a mismatch deletes the partial file, so a
bad mirror cannot poison a later pull.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

from localserve.store.hashing_sink import HashingSink
from localserve.store.hub import PullError, auth_headers, explain_http_error, timeout_s
from localserve.store.model_store import ModelStore

try:
    import fcntl
except ImportError:  # Windows: one daemon per store is the guard there
    fcntl = None  # type: ignore[assignment]

# Left free on the disk after a download: a full disk breaks far more than the pull.
DISK_MARGIN = 256 << 20

Progress = Callable[[int, int | None], None]


def _check_disk(folder: Path, need: int) -> None:
    free = shutil.disk_usage(folder).free
    if need + DISK_MARGIN > free:
        raise PullError(
            f"not enough disk space in {folder}: the download needs {need / 1e9:.2f} GB and "
            f"{free / 1e9:.2f} GB are free",
            507,
        )


def _open(url: str, start: int) -> Any:
    """The response from `start` on; a 416 (nothing past `start`) is returned as None."""
    headers = {"User-Agent": "localserve", **auth_headers()}
    if start:
        headers["Range"] = f"bytes={start}-"
    try:
        return urllib.request.urlopen(
            urllib.request.Request(url, headers=headers), timeout=timeout_s()
        )
    except urllib.error.HTTPError as exc:
        if exc.code == 416:
            return None
        raise explain_http_error(exc.code, url) from None
    except (TimeoutError, OSError) as exc:
        raise PullError(f"cannot reach the hub for {url}: {exc}", 504) from None


def fetch_blob(
    store: ModelStore, url: str, sha256: str | None, size: int | None, progress: Progress
) -> str:
    """Make the blob present in the store, downloading what is missing; returns its digest.

    With `sha256` unknown (the hub lists no LFS hash for small files), the bytes are kept
    under the digest they hash to: the manifest then records what was actually received.
    """
    if sha256 is not None and store.has_blob(f"sha256:{sha256}", size):
        progress(size or 0, size)
        return f"sha256:{sha256}"
    store.ensure()
    key = sha256 if sha256 is not None else hashlib.sha256(url.encode()).hexdigest()
    partial = store.partial_path(f"sha256:{key}", unverified=sha256 is None)
    fd = os.open(partial, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        if fcntl is not None:
            # A second process pulling the same blob waits here, then finds it done.
            fcntl.flock(fd, fcntl.LOCK_EX)
        if sha256 is not None and store.has_blob(f"sha256:{sha256}", size):
            partial.unlink(missing_ok=True)
            return f"sha256:{sha256}"
        # No fsync (it cost a third of a pull's time here): the rename is atomic against a crash
        # or a kill -9, since the page cache outlives the process; a blob that a power cut left
        # short fails the size check at resolve and is pulled again.
        got = _resume_or_start(fd, url, size, progress, partial)
    finally:
        os.close(fd)
    if sha256 is not None and got != sha256:
        partial.unlink(missing_ok=True)
        raise PullError(
            f"the downloaded file does not match its sha256 (expected {sha256}, got {got}); "
            f"it was discarded and nothing was registered. Source: {url}",
            502,
        )
    os.replace(partial, store.blob_path(f"sha256:{got}"))
    return f"sha256:{got}"


def _hash_prefix(fd: int, have: int) -> hashlib._Hash:
    hasher = hashlib.sha256()
    os.lseek(fd, 0, os.SEEK_SET)
    left = have
    while left:
        block = os.read(fd, min(left, 8 << 20))
        if not block:
            break
        hasher.update(block)
        left -= len(block)
    return hasher


def _resume_or_start(fd: int, url: str, size: int | None, progress: Progress, partial: Path) -> str:
    """Download what the partial file lacks; returns the sha256 of the whole file."""
    have = os.fstat(fd).st_size
    if size is not None and have > size:  # longer than the file can be: start over
        have = 0
    response = _open(url, have) if size is None or have < size else None
    if have and response is not None and response.status != 206:
        have = 0  # the server ignored the Range: what it sends is the whole file
    if response is None and (size is None or have != size):
        have, response = 0, _open(url, 0)  # a 416 with too few bytes: start over
    os.ftruncate(fd, have)
    hasher = _hash_prefix(fd, have)
    os.lseek(fd, have, os.SEEK_SET)
    if response is None:  # the partial file already holds everything
        progress(have, size)
        return hasher.hexdigest()
    with response:
        total = size
        length = response.headers.get("Content-Length")
        if length is not None:
            total = have + int(length)
        _check_disk(partial.parent, (total or have) - have)
        _stream(response, fd, HashingSink(fd, hasher), have, total, progress, url)
    return hasher.hexdigest()


def _stream(
    response: Any,
    fd: int,
    sink: HashingSink,
    done: int,
    total: int | None,
    progress: Progress,
    url: str,
) -> None:
    last = 0.0
    progress(done, total)
    try:
        while True:
            buf = sink.buffer()
            try:
                n = response.readinto(buf)
            except TimeoutError:
                raise PullError(
                    f"the hub stopped sending after {timeout_s():.0f}s "
                    f"({done} bytes of {url} so far); "
                    "pull again to resume",
                    504,
                ) from None
            except OSError as exc:
                raise PullError(
                    f"the download of {url} broke off: {exc}; pull again to resume", 502
                ) from None
            if not n:
                sink.discard(buf)
                break
            sink.commit(buf, n)
            done += n
            now = time.monotonic()
            if now - last > 0.1:
                progress(done, total)
                last = now
    finally:
        sink.close()
    progress(done, total)
    if total is not None and done != total:
        raise PullError(
            f"the download of {url} ended at {done} of {total} bytes; pull again to resume", 502
        )
