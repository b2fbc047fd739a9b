"""One blob from the hub to the store: resumable, verified, moved into place atomically.

Bytes land in `partial/` and are hashed as they arrive. A download cut short (a crash, a
`kill -9`, a dropped connection) resumes with an HTTP Range request from what the partial file
holds, re-hashing those bytes first. Only bytes whose sha256 matches reach `blobs/`, by one
rename; a mismatch deletes the partial file, so a bad mirror cannot poison a later pull.
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

from localserve.store.hub import PullError, auth_headers, explain_http_error, timeout_s
from localserve.store.model_store import ModelStore

try:
    import fcntl
except ImportError:  # Windows: one daemon per store is the guard there
    fcntl = None  # type: ignore[assignment]

CHUNK = 1 << 20
# Left free on the disk after a download: a full disk breaks far more than the pull.
DISK_MARGIN = 256 << 20

Progress = Callable[[int, int | None], None]


def _hash_existing(path: Path, hasher: "hashlib._Hash") -> int:
    done = 0
    with open(path, "rb") as f:
        while block := f.read(8 * CHUNK):
            hasher.update(block)
            done += len(block)
    return done


def _check_disk(folder: Path, need: int) -> None:
    free = shutil.disk_usage(folder).free
    if need + DISK_MARGIN > free:
        raise PullError(
            f"not enough disk space in {folder}: the download needs {need / 1e9:.2f} GB and "
            f"{free / 1e9:.2f} GB are free", 507)


def _open(url: str, start: int) -> "urllib.response.addinfourl":
    headers = {"User-Agent": "localserve", **auth_headers()}
    if start:
        headers["Range"] = f"bytes={start}-"
    try:
        return urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=timeout_s())
    except urllib.error.HTTPError as exc:
        if exc.code == 416:
            raise
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
    if sha256 is None:
        partial = store.partial_path("sha256:" + hashlib.sha256(url.encode()).hexdigest(), True)
    else:
        partial = store.partial_path(f"sha256:{sha256}")
    with open(partial, "ab") as out:
        if fcntl is not None:
            # A second process pulling the same blob waits here, then finds it done.
            fcntl.flock(out.fileno(), fcntl.LOCK_EX)
        if sha256 is not None and store.has_blob(f"sha256:{sha256}", size):
            partial.unlink(missing_ok=True)
            return f"sha256:{sha256}"
        hasher = hashlib.sha256()
        have = _hash_existing(partial, hasher)
        if size is not None:
            _check_disk(store.partial, size - have)
        _download(url, out, hasher, have, size, progress, partial)
        out.flush()
        os.fsync(out.fileno())
        got = hasher.hexdigest()
        if sha256 is not None and got != sha256:
            partial.unlink(missing_ok=True)
            raise PullError(
                f"the downloaded file does not match its sha256 (expected {sha256}, got {got}); "
                f"it was discarded and nothing was registered. Source: {url}", 502)
        os.replace(partial, store.blob_path(f"sha256:{got}"))
    return f"sha256:{got}"


def _download(
    url: str, out, hasher, have: int, size: int | None, progress: Progress, partial: Path
) -> None:
    if size is not None and have >= size:
        if have > size:  # longer than the file can be: start over
            out.truncate(0)
            hasher.__init__()  # type: ignore[misc]
            have = 0
        else:
            return
    try:
        response = _open(url, have)
    except urllib.error.HTTPError:  # 416: the range is past the end; start over
        out.truncate(0)
        hasher.__init__()  # type: ignore[misc]
        have = 0
        response = _open(url, 0)
    with response:
        if have and response.status != 206:  # the server ignored the Range: start over
            out.seek(0)
            out.truncate(0)
            hasher.__init__()  # type: ignore[misc]
            have = 0
        total = size
        length = response.headers.get("Content-Length")
        if total is None and length is not None:
            total = have + int(length)
            _check_disk(partial.parent, int(length))
        buf = bytearray(CHUNK)
        view = memoryview(buf)
        done, last = have, 0.0
        progress(done, total)
        while True:
            try:
                n = response.readinto(buf)
            except TimeoutError:
                raise PullError(
                    f"the hub stopped sending after {timeout_s():.0f}s ({done} bytes of {url} so far); "
                    "pull again to resume", 504) from None
            except OSError as exc:
                raise PullError(f"the download of {url} broke off: {exc}; pull again to resume", 502) from None
            if not n:
                break
            chunk = view[:n]
            out.write(chunk)
            hasher.update(chunk)
            done += n
            now = time.monotonic()
            if now - last > 0.1:
                progress(done, total)
                last = now
        progress(done, total)
        if total is not None and done != total:
            raise PullError(
                f"the download of {url} ended at {done} of {total} bytes; pull again to resume", 502)
