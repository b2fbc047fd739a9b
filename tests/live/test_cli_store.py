"""`pull`, `list`, `show`, `rm`, and `run` pulling what is missing, against a daemon whose store
pulls from a loopback hub (tests/support/hub_server.py) serving SmolLM2's real bytes."""

from __future__ import annotations

import sys
from pathlib import Path

import pexpect
import pytest

from tests.support.cli_support import SHORT, cli_env, localserve
from tests.support.hub_server import Hub
from tests.support.store_support import hub, hub_env, smol_bytes  # noqa: F401 - fixtures

ARGS = ("--no-default-model", "--parallel", "1", "--ctx", "512")


@pytest.fixture
def env(hub_env: Hub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, daemon_factory):
    """The CLI's environment, pointed at a daemon with an empty store of its own."""
    monkeypatch.setenv("LOCALSERVE_MODELS", str(tmp_path / "store"))
    # The user's own state folder: the daemon leaves its operator token there for the CLI.
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "home" / "state"))
    _, url = daemon_factory(ARGS)
    return cli_env(tmp_path / "home", url)


def rows(stdout: str) -> dict[str, list[str]]:
    """A table's rows by their first column."""
    return {line.split()[0]: line.split()[1:] for line in stdout.splitlines()[1:] if line}


def test_pull_reports_each_step_and_the_model_is_then_listed(env):
    done = localserve("pull", "tiny:135m", env=env)
    assert done.returncode == 0, done.stderr
    assert "pulling manifest" in done.stderr and "success" in done.stderr
    assert "tiny:135m" in rows(localserve("list", env=env).stdout)


def test_pull_in_a_terminal_draws_a_progress_bar_with_bytes_and_speed(env, hub_env):
    size = smol_bytes().stat().st_size
    hub_env.repos["localserve-test/SmolLM2-135M-Instruct-GGUF"][
        "SmolLM2-135M-Instruct-Q4_1.gguf"
    ].bytes_per_s = size / 3  # long enough to be drawn more than once
    child = pexpect.spawn(
        sys.executable,
        ["-m", "localserve", "pull", "tiny:135m"],
        env={**env, "TERM": "xterm"},
        encoding="utf-8",
        timeout=60,
        dimensions=(30, 160),
    )
    try:
        child.expect(r"\d+\.\d/\d+\.\d MiB")  # bytes done of the total
        child.expect(r"MiB/s")  # the speed
        child.expect(pexpect.EOF)
    finally:
        child.close(force=True)
    assert child.exitstatus == 0


def test_list_shows_name_size_and_modified(env):
    done = localserve("list", env=env)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[0].split() == ["NAME", "SIZE", "MODIFIED"]
    size, unit, *modified = rows(done.stdout)["smollm2"]
    assert unit == "MiB" and modified[-1] in ("ago", "now")


def test_show_prints_architecture_context_and_quantization(env):
    done = localserve("show", "smollm2", env=env)
    assert done.returncode == 0, done.stderr
    for fact in ("architecture", "llama", "context length", "8192", "Q4_1", "apache-2.0"):
        assert fact in done.stdout


def test_rm_deletes_a_pulled_model(env):
    assert localserve("pull", "tiny:135m", env=env).returncode == 0
    done = localserve("rm", "tiny:135m", env=env)
    assert done.returncode == 0, done.stderr
    assert "tiny:135m" not in rows(localserve("list", env=env).stdout)
    again = localserve("rm", "tiny:135m", env=env)
    assert again.returncode == 4 and "tiny:135m" in again.stderr


def test_run_pulls_a_missing_model_then_answers(env):
    done = localserve("run", "tiny:135m", *SHORT, "Say hi.", env=env)
    assert done.returncode == 0, done.stderr
    assert "success" in done.stderr, "the pull's progress"
    assert done.stdout.strip(), "the answer"
    assert "tiny:135m" in rows(localserve("list", env=env).stdout)


def test_a_failed_download_exits_1_with_the_reason(env, hub_env):
    hub_env.add("gated/repo", "model.gguf", smol_bytes(), status=401)
    done = localserve("pull", "hf://gated/repo/model.gguf", env=env)
    assert done.returncode == 1
    assert "download of 'hf://gated/repo/model.gguf' failed" in done.stderr
    assert "HF_TOKEN" in done.stderr


def test_import_links_a_file_and_list_shows_it_under_its_name(env, tmp_path: Path):
    mine = tmp_path / "My-Model.Q4.gguf"
    mine.write_bytes(smol_bytes().read_bytes())
    done = localserve("import", str(mine), "--name", "mine:v1", env=env)
    assert done.returncode == 0, done.stderr
    assert "imported 'mine:v1'" in done.stdout and "linked" in done.stdout
    assert "mine:v1" in rows(localserve("list", env=env).stdout)


def test_import_of_a_truncated_file_is_refused(env, tmp_path: Path):
    half = tmp_path / "half.gguf"
    half.write_bytes(smol_bytes().read_bytes()[: 1 << 20])
    done = localserve("import", str(half), env=env)
    assert done.returncode != 0
    assert "not a usable GGUF" in done.stderr


def test_scan_lists_the_gguf_files_under_a_folder(env, tmp_path: Path):
    cache = tmp_path / "cache" / "org"
    cache.mkdir(parents=True)
    (cache / "a.gguf").write_bytes(smol_bytes().read_bytes())
    done = localserve("scan", str(tmp_path / "cache"), env=env)
    assert done.returncode == 0, done.stderr
    assert "a.gguf" in done.stdout and "llama" in done.stdout
