"""The child process side of an upload's line check (upload.py's LineChecker). Its imports are
the checks' own, so a child starts in a fraction of a second."""

from __future__ import annotations

from pathlib import Path

from localserve.server.batches.lines import check_file


def check(path: Path, max_lines: int, max_values: int) -> tuple[int, frozenset[str]]:
    """`check_file` on the file at `path`, each line within the bound its request will meet
    when it runs."""
    with open(path, "rb") as f:
        return check_file(f, max_lines, max_values)
