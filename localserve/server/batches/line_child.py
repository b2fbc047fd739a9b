"""The child process side of an upload's line check (upload.py's LineChecker): what it runs, and
what ends it. Its imports are the checks' own, so a child starts in a fraction of a second."""

from __future__ import annotations

import multiprocessing
import os
import threading
from multiprocessing.connection import wait
from pathlib import Path

from localserve.server.batches.lines import check_file


def watch_parent() -> None:
    """The child's initializer: it ends when the daemon does, however that ends (kill -9 too).
    Its pool's queue is a pipe the child holds both ends of, so an idle child would otherwise
    wait on it for ever."""
    parent = multiprocessing.parent_process()
    if parent is not None:
        threading.Thread(target=_end_with, args=(parent.sentinel,), daemon=True).start()


def _end_with(sentinel: int) -> None:
    wait([sentinel])  # readable once the parent's end of it is closed: the parent is gone
    os._exit(0)


def check(path: Path, max_lines: int, max_containers: int) -> tuple[int, frozenset[str]]:
    """`check_file` on the file at `path`, each line within the bound its request will meet
    when it runs."""
    with open(path, "rb") as f:
        return check_file(f, max_lines, max_containers)
