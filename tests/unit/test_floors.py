"""The floors of docs/architecture.md: imports point only down (pyproject.toml's contracts)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from tests.support.helpers import REPO



def test_imports_point_only_down_the_floors() -> None:
    lint = Path(sys.executable).with_name("lint-imports")
    result = subprocess.run(
        [str(lint), "--no-cache"], cwd=REPO, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stdout + result.stderr
