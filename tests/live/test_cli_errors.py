"""Errors a person understands, and exit codes a script can rely on."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.cli_support import cli_env, localserve
from tests.support.daemons import HOST, free_port


@pytest.fixture
def env(tmp_path: Path, daemon_url: str) -> dict[str, str]:
    return cli_env(tmp_path, daemon_url)


def test_an_unreachable_daemon_is_exit_3_naming_the_address_tried(tmp_path):
    url = f"http://{HOST}:{free_port()}"
    done = localserve("ps", env=cli_env(tmp_path, url))
    assert done.returncode == 3
    assert f"cannot reach the localserve daemon at {url}" in done.stderr


def test_an_unknown_model_is_exit_4_with_the_nearest_catalog_names(env):
    done = localserve("run", "lama3", "hi", env=env)
    assert done.returncode == 4, done.stderr
    assert "'lama3' not found" in done.stderr
    assert "did you mean" in done.stderr and "llama3" in done.stderr


def test_a_model_larger_than_the_memory_budget_is_exit_1_with_need_and_budget(
    tmp_path, daemon_factory
):
    _, url = daemon_factory(["--no-default-model", "--memory-budget", "20MiB"])
    done = localserve("run", "smollm2", "hi", env=cli_env(tmp_path, url))
    assert done.returncode == 1
    assert "needs" in done.stderr and "budget is 20.0 MiB" in done.stderr


def test_a_bad_setting_is_exit_2_naming_where_it_came_from(env):
    done = localserve("ps", env={**env, "LOCALSERVE_PORT": "eleven"})
    assert done.returncode == 2
    assert "$LOCALSERVE_PORT" in done.stderr


def test_a_bad_command_line_is_exit_2(env):
    assert localserve("run", env=env).returncode == 2


def test_an_unknown_sampling_parameter_is_exit_2_listing_the_known_ones(env):
    done = localserve("run", "smollm2", "-p", "warmth=3", "hi", env=env)
    assert done.returncode == 2
    assert "unknown parameter 'warmth'" in done.stderr and "temperature" in done.stderr
