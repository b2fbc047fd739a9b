"""`localserve run NAME PROMPT` and `echo PROMPT | localserve run NAME`: one answer, plain text."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.cli_support import SHORT, cli_env, localserve

ANSI_ESCAPE = "\x1b["


@pytest.fixture
def env(tmp_path: Path, daemon_url: str) -> dict[str, str]:
    return cli_env(tmp_path, daemon_url)


def test_a_prompt_on_the_command_line_is_answered_once_in_plain_text(env):
    done = localserve("run", "smollm2", *SHORT, "Say hi.", env=env)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip(), "an answer"
    assert done.stdout.endswith("\n")
    assert ANSI_ESCAPE not in done.stdout


def test_a_prompt_piped_on_stdin_is_answered_once(env):
    done = localserve("run", "smollm2", *SHORT, env=env, stdin="Say hello.\n")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip()
    assert ">>>" not in done.stdout, "no chat prompt when the input is a pipe"


def test_verbose_prints_time_to_first_token_and_rates_on_stderr(env):
    done = localserve("run", "smollm2", *SHORT, "Say hello.", "--verbose", env=env)
    assert done.returncode == 0, done.stderr
    for label in ("time to first token:", "prompt rate:", "generation rate:"):
        assert label in done.stderr
    assert "time to first token" not in done.stdout, "the answer stays clean for a pipe"


def test_the_port_flag_wins_over_the_environment(env, daemon_url):
    port = daemon_url.rsplit(":", 1)[1]
    wrong = {**env, "LOCALSERVE_PORT": "1"}
    done = localserve("run", "smollm2", *SHORT, "Say hi.", "--port", port, env=wrong)
    assert done.returncode == 0, done.stderr


def test_parameters_on_the_command_line_make_the_answer_repeatable(env):
    ask = ("run", "smollm2", "-p", "temperature=0", "-p", "num_predict=12", "Name a fruit.")
    first, second = localserve(*ask, env=env), localserve(*ask, env=env)
    assert first.returncode == 0, first.stderr
    assert first.stdout.strip() and first.stdout == second.stdout
