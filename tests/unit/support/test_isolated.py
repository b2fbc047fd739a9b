"""The process boundary of tests that run llama.cpp's kernels in the pytest process
(tests/support/isolated.py), run on small test files by a pytest of their own."""

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

# A test's process that ends with a non-zero code after its setup reported, before its test did
# (a library's exit(), a crash the process turns into a plain code).
EXITING = """
import os
import pytest

@pytest.mark.kernels
def test_an_exit_mid_test():
    os._exit(3)
"""

# The parent decodes first, then a kernels test does: a fork of a process whose OpenMP pool ran
# hung in its first decode.
AFTER_THE_PARENT_DECODED = """
import pytest
from tests.support import in_process
from localserve.backends.llama_cpp import LlamaCppBackend
from localserve.ground.sampling import SamplingParams
from localserve.ground.step import StepChunk, StepPlan
from localserve.store.resolve import resolve

def decode():
    options = in_process.options(n_slots=1, n_ctx_slot=256)
    backend = LlamaCppBackend("smollm2", resolve("smollm2").path, options)
    prompt = backend.tokenize("The sky is", True)
    backend.seq_start(0, SamplingParams(temperature=0.0), prompt)
    assert len(backend.step(StepPlan([StepChunk(0, prompt, 0, True)]))) == 1
    backend.close()

def test_the_parent_decodes():
    decode()

@pytest.mark.kernels
def test_then_a_kernels_test_decodes():
    decode()
"""


def run_pytest(folder: Path, source: str) -> subprocess.CompletedProcess[str]:
    (folder / "test_inner.py").write_text(source, encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": str(REPO), "COLUMNS": "200"}
    command = [sys.executable, "-m", "pytest", "-p", "tests.support.isolated", "-p"]
    return subprocess.run(
        [*command, "no:cacheprovider", "-rA", "test_inner.py"],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
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


def test_a_kernels_test_decodes_after_its_parent_pytest_decoded(tmp_path: Path) -> None:
    run = run_pytest(tmp_path, AFTER_THE_PARENT_DECODED)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "2 passed" in run.stdout


def test_a_kernels_test_whose_process_exits_non_zero_after_its_setup_fails(tmp_path: Path) -> None:
    run = run_pytest(tmp_path, EXITING)
    assert run.returncode == 1, run.stdout + run.stderr
    assert "FAILED test_inner.py::test_an_exit_mid_test - the test's process exited with 3" in (
        run.stdout
    )
