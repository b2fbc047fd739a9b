"""The daemon from the CLI: `run` starts one when none answers, `status`, `ps`, `stop` and
`shutdown` talk to it, and every command names the address it could not reach."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from localserve.client import Client, DaemonUnreachable
from tests.support.cli_support import (
    SHORT,
    cli_env,
    daemon_pid,
    localserve,
    log_file,
    stops_daemon_at,
)
from tests.support.daemons import HOST, free_port


@pytest.fixture
def env(tmp_path: Path, daemon_url: str) -> dict[str, str]:
    return cli_env(tmp_path, daemon_url)


def test_run_starts_a_daemon_when_none_is_running_and_the_next_run_reuses_it(tmp_path):
    url = f"http://{HOST}:{free_port()}"
    env = cli_env(tmp_path, url)
    with stops_daemon_at(url):
        first = localserve("run", "smollm2", *SHORT, "Say hi.", env=env)
        assert first.returncode == 0, first.stderr
        assert first.stdout.strip()
        pid = daemon_pid(url)
        assert pid is not None, "a daemon answers at the configured address"
        assert os.getsid(pid) != os.getsid(0), "detached: a session of its own"

        second = localserve("run", "smollm2", *SHORT, "Say hello.", env=env)
        assert second.returncode == 0, second.stderr
        assert daemon_pid(url) == pid, "the second run used the running daemon"
        log = log_file(env).read_text()
        assert log.count("started by `localserve run`") == 1
        assert "listening on" in log, "the background daemon logs to platformdirs' log dir"


def test_shutdown_stops_the_daemon(tmp_path, daemon_factory):
    proc, url = daemon_factory(["--no-default-model"])
    env = cli_env(tmp_path, url)
    done = localserve("shutdown", env=env)
    assert done.returncode == 0, done.stderr
    assert proc.wait(timeout=30) == 0, "a clean exit"
    with pytest.raises(DaemonUnreachable):
        Client(url).health()
    assert localserve("status", env=env).returncode == 3


def test_status_shows_version_address_and_memory_pools(env, daemon_url):
    done = localserve("status", env=env)
    assert done.returncode == 0, done.stderr
    assert f"is running at {daemon_url}" in done.stdout
    assert "0.1.0" in done.stdout
    assert "BUDGET" in done.stdout and "cpu" in done.stdout


def test_ps_shows_the_loaded_model_with_size_processor_device_kv_cache_and_in_flight(env):
    done = localserve("ps", env=env)
    assert done.returncode == 0, done.stderr
    header, *rows = done.stdout.splitlines()
    assert header.split() == [
        *("NAME", "SIZE", "PROCESSOR", "DEVICE", "KV", "CACHE", "IN", "FLIGHT", "UNTIL")
    ]
    row = next(r for r in rows if r.startswith("smollm2 "))
    assert "MiB" in row and " 100% CPU " in row and " cpu " in row and " f16 " in row


def test_stop_unloads_the_model(tmp_path, daemon_factory):
    _, url = daemon_factory(["--model", "smollm2", "--parallel", "1", "--ctx", "512"])
    env = cli_env(tmp_path, url)
    done = localserve("stop", "smollm2", env=env)
    assert done.returncode == 0, done.stderr
    assert "smollm2" not in localserve("ps", env=env).stdout
