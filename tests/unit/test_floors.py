"""The floors of docs/architecture.md: imports point only down (pyproject.toml's contracts), and
no module reaches itself again through the modules it imports."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import grimp

from tests.support.helpers import REPO

PACKAGES = ("localserve", "localserve_native", "localserve_tray", "localserve_installer")


def test_imports_point_only_down_the_floors() -> None:
    lint = Path(sys.executable).with_name("lint-imports")
    result = subprocess.run(
        [str(lint), "--no-cache"], cwd=REPO, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stdout + result.stderr


def _circles(imports: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan's algorithm)."""
    order: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(module: str) -> None:
        order[module] = low[module] = len(order)
        stack.append(module)
        for other in sorted(imports[module]):
            if other not in order:
                visit(other)
                low[module] = min(low[module], low[other])
            elif other in stack:
                low[module] = min(low[module], order[other])
        if low[module] == order[module]:
            group = stack[stack.index(module) :]
            del stack[stack.index(module) :]
            if len(group) > 1:
                found.append(sorted(group))

    for module in sorted(imports):
        if module not in order:
            visit(module)
    return found


def test_no_import_circle_remains() -> None:
    # Every import counts, those inside functions too: a circle a reader must untangle is one.
    graph = grimp.build_graph(*PACKAGES)
    imports = {m: set(graph.find_modules_directly_imported_by(m)) for m in graph.modules}
    assert _circles(imports) == []


def test_the_circle_finder_finds_a_circle() -> None:
    imports = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert _circles(imports) == [["a", "b", "c"]]
