"""A fork boundary for tests that run llama.cpp's kernels in the pytest process: a plugin.

A test marked `kernels` runs in a child process of pytest (tests/conftest.py loads the plugin):
a native crash (SIGILL, SIGSEGV, SIGABRT) fails that test with the signal's name, and the run
goes on.
The child sets up its own fixtures and tears them all down again before it reports: the parent's
fixtures (a session daemon) are reused by the child, never finalized by it.
"""

from __future__ import annotations

import json
import os
import signal
import time

import pytest
from _pytest.runner import SetupState, runtestprotocol


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "kernels: runs llama.cpp's kernels in the pytest process, so in a child"
    )


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> bool | None:
    return run_forked(item) if item.get_closest_marker("kernels") else None


def run_forked(item: pytest.Item) -> bool:
    """Run `item`'s whole protocol (setup, call, teardown) in a child process and log its
    reports here; a child that dies is logged as the test failing, naming the signal."""
    item.ihook.pytest_runtest_logstart(nodeid=item.nodeid, location=item.location)
    for report in _reports_of_child(item):
        item.ihook.pytest_runtest_logreport(report=report)
    item.ihook.pytest_runtest_logfinish(nodeid=item.nodeid, location=item.location)
    return True


def _reports_of_child(item: pytest.Item) -> list[pytest.TestReport]:
    started = time.monotonic()
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: nothing of it may return into the parent's pytest
        os.close(read_end)
        code = 1
        try:
            # A set-up state of its own: the child finalizes what it set up, never the
            # parent's fixtures, whose finalizers stay in the parent's state.
            item.session._setupstate = SetupState()
            reports = runtestprotocol(item, log=False, nextitem=None)
            hook = item.config.hook
            data = [
                hook.pytest_report_to_serializable(config=item.config, report=r) for r in reports
            ]
            with os.fdopen(write_end, "w", encoding="utf-8") as pipe:
                json.dump(data, pipe)
            code = 0
        finally:
            os._exit(code)
    os.close(write_end)
    with os.fdopen(read_end, encoding="utf-8") as pipe:
        text = pipe.read()  # before waiting: a child blocked on a full pipe would never exit
    _, status = os.waitpid(pid, 0)
    if os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0:
        hook = item.config.hook
        return [
            hook.pytest_report_from_serializable(config=item.config, data=raw)
            for raw in json.loads(text)
        ]
    return [_died(item, status, time.monotonic() - started)]


def _died(item: pytest.Item, status: int, seconds: float) -> pytest.TestReport:
    if os.WIFSIGNALED(status):
        number = os.WTERMSIG(status)
        try:
            name = signal.Signals(number).name
        except ValueError:  # a real-time signal has no name
            name = f"signal {number}"
        why = f"the test's process died of {name}; its stderr shows where"
    else:
        why = f"the test's process exited with {os.WEXITSTATUS(status)} before reporting"
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
