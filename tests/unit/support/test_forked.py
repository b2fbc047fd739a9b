"""The fork boundary of tests that run llama.cpp's kernels in the pytest process
(tests/support/forked.py), run on small test files by a pytest of their own."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.support.helpers import REPO

CRASHING = """
import os
import pytest

@pytest.mark.kernels
def test_a_native_crash():
    os.abort()  # as llama.cpp's abort on a failed GGML_ASSERT

@pytest.mark.kernels
def test_after_the_crash():
    assert True

def test_in_the_parent():
    assert True
"""

SESSION_FIXTURE = """
import os
import pytest

@pytest.fixture(scope="session")
def daemon():
    yield os.getpid()
    with open("finalized.txt", "a") as f:
        f.write(f"{os.getpid()}\\n")

def test_the_parent_sets_up_the_fixture(daemon):
    assert daemon == os.getpid()

@pytest.mark.kernels
def test_a_child_reuses_it(daemon):
    assert daemon == os.getppid()
"""


def run_pytest(folder: Path, source: str) -> subprocess.CompletedProcess[str]:
    (folder / "test_inner.py").write_text(source, encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": str(REPO), "COLUMNS": "200"}
    command = [
        sys.executable,
        "-m",
        "pytest",
        "-p",
        "tests.support.forked",
        "-p",
        "no:cacheprovider",
    ]
    return subprocess.run(
        [*command, "-rA", "test_inner.py"],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_a_native_crash_fails_its_test_naming_the_signal_and_the_run_goes_on(
    tmp_path: Path,
) -> None:
    run = run_pytest(tmp_path, CRASHING)
    assert run.returncode == 1, run.stdout + run.stderr
    assert "1 failed, 2 passed" in run.stdout
    assert "FAILED test_inner.py::test_a_native_crash - the test's process died of SIGABRT" in (
        run.stdout
    )
    assert "PASSED test_inner.py::test_after_the_crash" in run.stdout


def test_a_forked_test_reuses_the_parents_session_fixture_and_never_finalizes_it(
    tmp_path: Path,
) -> None:
    run = run_pytest(tmp_path, SESSION_FIXTURE)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "2 passed" in run.stdout
    finalized = (tmp_path / "finalized.txt").read_text().split()
    assert len(finalized) == 1  # by the parent, once
