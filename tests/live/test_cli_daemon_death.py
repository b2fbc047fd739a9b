"""A daemon that dies is never silent: `run` says the answer was cut off and of what the daemon
died, and the daemon's log ends with why it stopped (a signal it saw, or a traceback that
faulthandler wrote for a fatal one)."""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import time

import pytest

from localserve.client import Client
from tests.support.cli_support import cli_env, daemon_pid, log_file, stops_daemon_at
from tests.support.daemons import HOST, free_port, log_text

# SmolLM2 at temperature 0 counts on for hundreds of tokens: the kill lands mid-answer.
LONG = "Count from 1 to 500, one number per line."
FIRST_OUTPUT_TIMEOUT_S = 180.0


def first_output(proc: subprocess.Popen[bytes], timeout_s: float) -> bytes:
    """The first bytes `proc` writes to stdout (it must still be running then)."""
    assert proc.stdout is not None
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        ready, _, _ = select.select([proc.stdout], [], [], 0.5)
        if ready:
            data = os.read(proc.stdout.fileno(), 4096)
            assert data, f"run ended with no answer: exit {proc.wait()}"
            return data
        assert proc.poll() is None, f"run exited with {proc.returncode} before answering"
    raise AssertionError(f"no answer within {timeout_s:.0f} s")


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGSEGV], ids=["SIGKILL", "SIGSEGV"])
def test_run_exits_1_with_a_message_when_the_daemon_dies_mid_answer(tmp_path, sig):
    url = f"http://{HOST}:{free_port()}"
    env = cli_env(tmp_path, url)
    with stops_daemon_at(url):
        # No daemon at the address: `run` starts one, so it holds the daemon's exit status.
        run = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "localserve",
                "run",
                "smollm2",
                "--verbose",
                "-p",
                "num_predict=400",
                "-p",
                "temperature=0",
                LONG,
            ],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
        )
        try:
            head = first_output(run, FIRST_OUTPUT_TIMEOUT_S)
            pid = daemon_pid(url)
            assert pid is not None and pid != run.pid
            os.kill(pid, sig)
            rest, err = run.communicate(timeout=60)
        finally:
            if run.poll() is None:
                run.kill()
                run.wait()
    stderr = err.decode()
    assert run.returncode == 1, stderr
    # A FIN or, with bytes still unread in the dead daemon's socket, a reset.
    assert "the answer was cut off: the d" in stderr or "the answer was cut off: the c" in stderr
    assert "before the answer ended" in stderr
    assert f"(see the log: {log_file(env)})" in stderr
    assert f"the daemon exited on signal {sig.name}" in stderr
    assert "total duration" not in stderr, "no timings: the answer did not end"
    assert (head + rest).strip(), "the text that came before the cut is kept"
    if sig == signal.SIGSEGV:
        assert "Fatal Python error: Segmentation fault" in stderr, "the log's tail is shown"


def test_serve_logs_why_it_stopped(daemon_factory):
    proc, _ = daemon_factory(["--no-default-model"])
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=30) == 0, "a clean exit"
    last = log_text(proc.log_path).strip().splitlines()[-1]
    assert last.endswith("localserve stopped: SIGTERM"), last


def test_serve_logs_a_shutdown_asked_over_http_as_its_last_line(daemon_factory):
    proc, url = daemon_factory(["--no-default-model"])
    Client(url).shutdown()
    assert proc.wait(timeout=30) == 0
    last = log_text(proc.log_path).strip().splitlines()[-1]
    assert last.endswith("localserve stopped: shutdown requested over HTTP"), last


def test_a_fatal_signal_leaves_its_name_and_a_traceback_in_the_log(daemon_factory):
    proc, _ = daemon_factory(["--no-default-model"])
    proc.send_signal(signal.SIGSEGV)  # as a crash inside native code raises it
    assert proc.wait(timeout=30) == -signal.SIGSEGV
    log = log_text(proc.log_path)
    assert "Fatal Python error: Segmentation fault" in log
    assert "most recent call first" in log, "every thread's Python traceback"
