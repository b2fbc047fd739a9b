"""The house rules a reader relies on, checked on the tree itself: a file path that a comment, a
docstring, pyproject.toml or a doc names is there; no module outgrows 400 lines; the formatter
is never told to look away."""

from __future__ import annotations

import io
import re
import subprocess
import tokenize
from collections.abc import Iterator
from pathlib import Path

from tests.support.helpers import REPO

# A relative path with at least one folder and a file type of this repository's own.
_PATH = re.compile(
    r"(?<![\w./:-])((?:[\w.-]+/)+[\w.-]+\."
    r"(?:py|toml|md|jinja|iss|spec|json|sh|txt|html|js|css|plist|service|desktop))\b"
)
MAX_LINES = 400


def _tracked(*patterns: str) -> list[Path]:
    out = subprocess.run(
        ["git", "ls-files", *patterns], cwd=REPO, capture_output=True, text=True, check=True
    ).stdout.split()
    return [REPO / name for name in out if (REPO / name).exists()]


def _notes(path: Path) -> Iterator[tuple[int, str]]:
    """A Python file's comments and docstrings, with their lines; any other file whole."""
    source = path.read_text(encoding="utf-8")
    if path.suffix != ".py":
        yield 1, source
        return
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        docstring = token.type == tokenize.STRING and token.string.lstrip("rbuRBU").startswith(
            ('"""', "'''")
        )
        if token.type == tokenize.COMMENT or docstring:
            yield token.start[0], token.string


def _exists(named: str, where: Path, tracked: list[Path]) -> bool:
    """Named from the repository's root, from localserve/, or from any folder above the file
    that names it (a face's module names the edge's modules from server/ down); a doc may name
    a file from the folder its tree listing shows it in."""
    if named.startswith("../"):
        return True  # outside the repository (the workplace's shared notes): not the tree's
    roots = [REPO, REPO / "localserve", *where.parents]
    if any((root / named).exists() for root in roots if root.is_relative_to(REPO)):
        return True
    return where.suffix == ".md" and any(str(p).endswith("/" + named) for p in tracked)


def test_every_file_path_named_in_a_comment_pyproject_or_a_doc_exists() -> None:
    files = _tracked("*.py", "pyproject.toml", "README.md", "docs/*.md")
    tracked = _tracked()
    missing = [
        f"{path.relative_to(REPO)}:{line}: {named}"
        for path in files
        for line, text in _notes(path)
        for named in _PATH.findall(text)
        if not _exists(named, path, tracked)
    ]
    assert not missing, "named but not in the tree:\n" + "\n".join(missing)


def test_no_module_is_over_400_lines() -> None:
    sizes = {path: len(path.read_text(encoding="utf-8").splitlines()) for path in _tracked("*.py")}
    over = [f"{p.relative_to(REPO)}: {n}" for p, n in sizes.items() if n > MAX_LINES]
    assert not over, f"over {MAX_LINES} lines:\n" + "\n".join(over)


def test_the_formatter_is_never_told_to_skip() -> None:
    marker = "fmt: " + "skip"  # spelled apart, so that this file does not match itself
    skipped = [
        f"{p.relative_to(REPO)}:{i}"
        for p in _tracked("*.py")
        for i, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
        if marker in line or "fmt: " + "off" in line
    ]
    assert not skipped, "formatter markers:\n" + "\n".join(skipped)


def _lines(*patterns: str) -> Iterator[tuple[Path, int, str]]:
    for path in _tracked(*patterns):
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            yield path, number, line


def test_no_test_or_benchmark_hard_codes_llama_cpp_extra_buffer_types() -> None:
    """They take the probe's verdict (tests/support/in_process.py): hard-coded on, the AMX
    kernels of an AMX host die in the process that runs them."""
    hard_coded = re.compile(r"use_extra_bufts\s*=\s*" + "True")  # apart: not to match itself
    found = [
        f"{p.relative_to(REPO)}:{n}"
        for p, n, line in _lines("tests/*.py", "benchmarks/*.py")
        if hard_coded.search(line)
    ]
    assert not found, "hard-coded extra buffer types:\n" + "\n".join(found)


def test_a_test_that_decodes_with_llama_cpp_in_process_is_marked_kernels() -> None:
    """Marked, it runs in its own process (tests/support/isolated.py): a native crash fails it
    alone."""
    decodes = ("LlamaCpp" + "Backend(", "llama_" + "decode(")
    unmarked = [
        str(p.relative_to(REPO))
        for p in _tracked("tests/*.py")
        if any(call in p.read_text(encoding="utf-8") for call in decodes)
        and "pytest.mark.kernels" not in p.read_text(encoding="utf-8")
    ]
    assert not unmarked, "decode in the pytest process, unmarked:\n" + "\n".join(unmarked)
