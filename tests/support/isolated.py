"""A process boundary for tests that run llama.cpp's kernels in the pytest process: a plugin.

A test marked `kernels` runs in a pytest of its own, a fresh process (tests/conftest.py loads
the plugin): a native crash (SIGILL, SIGSEGV, SIGABRT) fails that test with the signal's name
and its stderr's tail, and the run goes on; a test that hangs past HANG_S fails as hung. Not a
fork: llama.cpp's OpenMP thread pool does not survive one, and a child forked from a pytest
that had decoded hung in its first decode. The inner pytest shares the outer one's sandbox
(LOCALSERVE_TEST_SANDBOX), so the probe's verdicts are the same, and sends its reports back
through a file.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

INNER = "LOCALSERVE_TEST_KERNELS_REPORT"  # set in the inner pytest: the file its reports go to
HANG_S = 900.0


_INNER_CONFIG: list[pytest.Config] = []


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "kernels: runs llama.cpp's kernels in the pytest process, so in one of its own"
    )
    if os.environ.get(INNER):
        _INNER_CONFIG.append(config)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> bool | None:
    if os.environ.get(INNER) or not item.get_closest_marker("kernels"):
        return None
    item.ihook.pytest_runtest_logstart(nodeid=item.nodeid, location=item.location)
    for report in _reports_of_own_process(item):
        item.ihook.pytest_runtest_logreport(report=report)
    item.ihook.pytest_runtest_logfinish(nodeid=item.nodeid, location=item.location)
    return True


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """In the inner pytest: each report, serialized, a line of the file the outer one reads."""
    path = os.environ.get(INNER)
    if path and _INNER_CONFIG:
        config = _INNER_CONFIG[0]
        data = config.hook.pytest_report_to_serializable(config=config, report=report)
        with open(path, "a", encoding="utf-8") as out:
            out.write(json.dumps(data) + "\n")


def _reports_of_own_process(item: pytest.Item) -> list[pytest.TestReport]:
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="kernels-") as folder:
        reports = Path(folder) / "reports.jsonl"
        command = [sys.executable, "-m", "pytest", item.nodeid, "-q", "-p", "no:cacheprovider"]
        command += ["-p", "tests.support.isolated"]  # registered once, however named
        env = {**os.environ, INNER: str(reports)}
        try:
            done = subprocess.run(
                command,
                cwd=item.config.rootpath,
                env=env,
                capture_output=True,
                text=True,
                timeout=HANG_S,
            )
        except subprocess.TimeoutExpired:
            why = f"the test's process hung: no end within {HANG_S:.0f} s"
            return [_failed(item, why, time.monotonic() - started)]
        lines = reports.read_text(encoding="utf-8").splitlines() if reports.exists() else []
    hook = item.config.hook
    found = [
        hook.pytest_report_from_serializable(config=item.config, data=json.loads(line))
        for line in lines
    ]
    if not reported_whole(done.returncode, found):
        return [_failed(item, _death(done), time.monotonic() - started)]
    return found


def reported_whole(returncode: int, reports: list[pytest.TestReport]) -> bool:
    """The inner pytest said all there is of its test: it ran to its end (a call, or a skip),
    and exited 0 unless it reported a failure. An exit after the setup's report, or a non-zero
    exit with every report passed (a crash in teardown, `os._exit`), is no such ending."""
    ended = any(r.when == "call" or r.skipped for r in reports)
    return returncode >= 0 and ended and (returncode == 0 or any(r.failed for r in reports))


def _death(done: subprocess.CompletedProcess[str]) -> str:
    code = done.returncode
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:  # a real-time signal has no name
            name = f"signal {-code}"
        head = f"the test's process died of {name}"
    else:
        head = f"the test's process exited with {code} before reporting all of its test"
    return f"{head}; the end of its stderr:\n{done.stderr[-3000:]}"


def _failed(item: pytest.Item, why: str, seconds: float) -> pytest.TestReport:
    return pytest.TestReport(
        item.nodeid,
        item.location,
        {name: 1 for name in item.keywords},
        "failed",
        why,
        "call",
        [],
        seconds,
    )
