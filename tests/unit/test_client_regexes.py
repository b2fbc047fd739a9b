"""A house rule (#57): every regular expression in localserve/server/ and localserve/ground/,
the floors that read what clients send, is listed here with why it takes time linear in what
it reads. Three did not: the JSON depth check's string regex and the duration parser's each
began again wherever a match failed, and the Ollama template's had a lazy run between two runs
of spaces; a body of 64 KB held the event loop for seconds. A new use fails this test until it
is added below, consciously.

What is linear: no quantifier inside another and no two quantifiers that can take the same
characters one after the other; and a pattern that can run long before it fails is only ever
matched where its text starts (`match`, `fullmatch`), never searched for (`search`, `findall`,
`finditer`, `sub` begin again at every position), or it reads a text of bounded length."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

from tests.support.helpers import REPO

PACKAGE = REPO / "localserve"
FLOORS = ("server", "ground")
# The functions of `re` that take a pattern.
TAKE_A_PATTERN = set("compile match fullmatch search sub subn findall finditer split".split())

# (file under localserve/, pattern): why it is linear, and what it reads.
ALLOWED: dict[tuple[str, str | bytes], str] = {
    ("server/ollama/template.py", r"\.(System|Prompt|Response)"): (
        "no quantifier; matched whole against one action of a template"
    ),
    ("server/http/hosts.py", r"[/?#@\\\x00-\x20\x7f]"): (
        "one character, searched for in a Host header: one try per position"
    ),
    ("server/http/request_log.py", r"[A-Za-z0-9._:\-]{1,128}"): (
        "one class, at most 128 times, matched whole against a client's request id"
    ),
    ("server/http/request_log.py", r"[!-\[\]-~]*"): (
        "one class, matched whole against a request's path"
    ),
    ("server/http/body_check.py", rb"\\u[dD][89a-fA-F]"): (
        "three fixed bytes, searched for in a body: one try per position"
    ),
    ("server/http/body_check.py", rb"\xed[\xa0-\xbf]"): (
        "two fixed bytes, searched for in a body: one try per position"
    ),
    ("ground/units.py", r"(-?\d+(?:\.\d+)?)(ms|s|m|h)"): (
        "matched only where the last part ended, on at most 64 characters of a keep_alive; "
        "its two runs of digits are split by a '.'"
    ),
    ("ground/upstreams.py", r"^[A-Za-z0-9_-]{1,64}$"): (
        "one class, at most 64 times, anchored; an upstream's name in config.toml or the CLI"
    ),
    ("ground/upstreams.py", r"^[A-Za-z_][A-Za-z0-9_]*$"): (
        "one class run, anchored; the name of a key's variable in config.toml or the CLI"
    ),
    ("ground/store_layout.py", r"sha256-[0-9a-f]{64}"): (
        "fixed width, matched whole against a file name in the store (no client's text)"
    ),
    ("ground/store_layout.py", r"(sha256|url)-[0-9a-f]{64}\.partial"): (
        "fixed width, matched whole against a file name in the store (no client's text)"
    ),
    ("ground/store_layout.py", r"[^/]+\.json|\.tmp-[^/]*"): (
        "one class run before a fixed tail, matched whole against a file name in the store"
    ),
}


def _sources() -> Iterator[Path]:
    for floor in FLOORS:
        yield from sorted((PACKAGE / floor).rglob("*.py"))


def _patterns(path: Path) -> Iterator[str | bytes]:
    """The pattern of each call of `re` in a module; a pattern that is no literal, or a name
    imported from `re` (which the calls below would not see), stands as a message instead."""
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module in ("re", "regex"):
            yield f"from {node.module} import ... (write re.compile, so that this test sees it)"
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name == "regex" or (alias.name == "re" and alias.asname):
                    yield f"import {alias.name} as {alias.asname} (write import re)"
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and isinstance(node.func.value, ast.Name)
            and node.func.value.id == "re"
            and node.func.attr in TAKE_A_PATTERN
        ):
            first = node.args[0] if node.args else None
            if isinstance(first, ast.Constant) and isinstance(first.value, (str, bytes)):
                yield first.value
            else:
                yield f"re.{node.func.attr} of no literal pattern, line {node.lineno}"


def _found() -> set[tuple[str, str | bytes]]:
    return {
        (path.relative_to(PACKAGE).as_posix(), pattern)
        for path in _sources()
        for pattern in _patterns(path)
    }


def test_every_regex_in_server_and_ground_is_listed_with_why_it_is_linear() -> None:
    unlisted = sorted(_found() - ALLOWED.keys(), key=repr)
    assert not unlisted, (
        "a regex that is not in ALLOWED (tests/unit/test_client_regexes.py): add it with why "
        "it is linear in what it reads, or read that text without one:\n"
        + "\n".join(f"{path}: {pattern!r}" for path, pattern in unlisted)
    )


def test_every_listed_regex_is_still_in_the_code() -> None:
    gone = sorted(ALLOWED.keys() - _found(), key=repr)
    assert not gone, "listed in ALLOWED but no longer used:\n" + "\n".join(map(repr, gone))
