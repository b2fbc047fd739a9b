"""The real coding agents, unmodified, end to end against a daemon with default settings but
its models (#24, #44): Claude Code (`claude -p`, through Anthropic's Messages API), Codex
(`codex exec --oss`, through Ollama's start-up calls and OpenAI's Responses API), opencode, Qwen
Code (`qwen -p`) and Continue's `cn -p` (Chat Completions), and aider, at the versions
tests/support/agent_clis.py pins, configured by what `localserve launch AGENT --print` prints,
used verbatim.

The daemon serves Gemma 3 270M from a file of its own (`--model ./gemma3.gguf`, as a user
would), with the context fitted to it (32768 tokens a slot): their first prompts are 1,400 to
14,000 tokens. A 270M model writes nothing useful, and left to itself writes until the context
is full (24,000 tokens, 7 minutes here, for Codex's first answer): so each agent is launched with
`--max-output CAP`, and the daemon caps the answers of requests that set none (`--max-tokens`,
its one setting besides the model: Codex sends no cap). What is tested is that every exchange
completes: each agent receives the model's streamed text, and every request it made was
answered 200.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.agent_clis import agent
from tests.support.daemons import discard, log_text
from tests.support.live import start_daemon
from tests.support.residency_support import gemma_file

CAP = 32
RUN_TIMEOUT_S = 600  # a first prompt of 12,000 tokens prefills in about 75 s on 2 cores


@pytest.fixture(scope="module")
def daemon(tmp_path_factory) -> Iterator[tuple[str, subprocess.Popen]]:
    linked = tmp_path_factory.mktemp("agents") / "gemma3.gguf"
    os.symlink(gemma_file(), linked)
    proc, url = start_daemon(["--model", str(linked), "--max-tokens", str(CAP)])
    try:
        yield url, proc
    finally:
        discard(proc)


def launch_print(url: str, name: str, *agent_args: str) -> tuple[dict[str, str], list[str]]:
    """What `localserve launch NAME --model gemma3 --print -- ARGS` prints: the environment
    and the command, parsed as a shell would."""
    port = url.rsplit(":", 1)[1]
    done = subprocess.run(
        [sys.executable, "-m", "localserve", "launch", name, "--model", "gemma3", "--port", port]
        + ["--max-output", str(CAP), "--print", "--", *agent_args],
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    lines = done.stdout.strip().splitlines()
    env = {}
    for line in lines[:-1]:
        name_, _, value = line.removeprefix("export ").partition("=")
        env[name_] = shlex.split(value)[0]
    return env, shlex.split(lines[-1])


def requests_logged(proc: subprocess.Popen, path: str) -> list[str]:
    return [
        line
        for line in log_text(proc.log_path).splitlines()  # type: ignore[attr-defined]
        if f" {path} " in line and "localserve.requests" in line
    ]


def agent_run(
    program: Path, command: list[str], env: dict[str, str], home: Path
) -> subprocess.CompletedProcess[str]:
    """The command as launch printed it, with the installed program, in a home of its own."""
    return subprocess.run(
        [str(program), *command[1:]],
        env={**os.environ, "HOME": str(home), **env},
        cwd=home,
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT_S,
        stdin=subprocess.DEVNULL,
    )


def run(program: Path, command: list[str], env: dict[str, str], home: Path) -> list[dict]:
    """The agent's JSON lines, whatever it exits with."""
    done = agent_run(program, command, env, home)
    lines = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    assert lines, f"exit {done.returncode}\nstdout: {done.stdout}\nstderr: {done.stderr}"
    return lines


def test_claude_code_completes_its_exchange(daemon, tmp_path) -> None:
    claude = agent("claude")
    if claude is None:
        pytest.skip(
            "Claude Code could not be installed from the npm registry (tests/support/agent_clis.py)"
        )
    url, proc = daemon
    env, command = launch_print(
        url, "claude", "-p", "Say hi", "--output-format", "stream-json", "--verbose"
    )
    assert env["CLAUDE_CODE_ATTRIBUTION_HEADER"] == "0" and command[0] == "claude"
    lines = run(claude, command, env, tmp_path)
    answers = [
        line["message"]
        for line in lines
        if line.get("type") == "assistant" and line["message"].get("model") == "gemma3"
    ]
    assert answers and any(block.get("text") for block in answers[0]["content"]), lines
    served = requests_logged(proc, "/v1/messages")
    assert served and all(" 200 " in line for line in served), served


def test_codex_completes_its_exchange(daemon, tmp_path) -> None:
    codex = agent("codex")
    if codex is None:
        pytest.skip(
            "Codex could not be installed from the npm registry (tests/support/agent_clis.py)"
        )
    url, proc = daemon
    env, command = launch_print(url, "codex", "exec", "--json", "--skip-git-repo-check", "Say hi")
    assert env["CODEX_OSS_BASE_URL"] == f"{url}/v1" and command[:2] == ["codex", "exec"]
    lines = run(codex, command, env, tmp_path)
    said = [
        line["item"]["text"]
        for line in lines
        if line.get("type") == "item.completed" and line["item"].get("type") == "agent_message"
    ]
    assert said and said[0], lines
    for path in ("/api/tags", "/v1/responses"):  # /api/version is a poll, logged at debug
        served = requests_logged(proc, path)
        assert served and all(" 200 " in line for line in served), (path, served)


def run_plain(name: str, command: list[str], env: dict[str, str], home: Path) -> str:
    """A text-printing agent run once: its standard output, after it exited 0."""
    program = agent(name)
    if program is None:
        pytest.skip(f"{name} could not be installed from the npm registry (agent_clis.py)")
    done = agent_run(program, command, env, home)
    assert done.returncode == 0, f"stdout: {done.stdout}\nstderr: {done.stderr}"
    return done.stdout


def test_opencode_completes_its_exchange(daemon, tmp_path) -> None:
    url, proc = daemon
    env, command = launch_print(url, "opencode", "run", "Say hi")
    assert json.loads(env["OPENCODE_CONFIG_CONTENT"])["model"] == "localserve/gemma3"
    assert run_plain("opencode", command, env, tmp_path).strip()
    served = requests_logged(proc, "/v1/chat/completions")
    assert served and all(" 200 " in line for line in served), served


def served_during(proc: subprocess.Popen, path: str, before: int) -> list[str]:
    return requests_logged(proc, path)[before:]


def test_qwen_code_completes_its_exchange(daemon, tmp_path) -> None:
    url, proc = daemon
    env, command = launch_print(url, "qwen", "-p", "Say hi")
    assert env["QWEN_CODE_MAX_OUTPUT_TOKENS"] == str(CAP) and command[0] == "qwen"
    before = len(requests_logged(proc, "/v1/chat/completions"))
    assert run_plain("qwen", command, env, tmp_path).strip()
    served = served_during(proc, "/v1/chat/completions", before)
    assert served and all(" 200 " in line for line in served), served


def test_continue_cn_completes_its_exchange(daemon, tmp_path) -> None:
    url, proc = daemon
    env, command = launch_print(url, "continue", "-p", "Say hi")
    assert command[0] == "cn" and command[command.index("--config") + 1].endswith("continue.yaml")
    before = len(requests_logged(proc, "/v1/chat/completions"))
    assert run_plain("cn", command, env, tmp_path).strip()
    served = served_during(proc, "/v1/chat/completions", before)
    assert served and all(" 200 " in line for line in served), served


def test_launch_refuses_plainly_where_the_agents_prompt_cannot_fit(daemon) -> None:
    port = daemon[0].rsplit(":", 1)[1]
    done = subprocess.run(
        [sys.executable, "-m", "localserve", "launch", "claude", "--port", port, "--print"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode != 0
    assert "first prompt takes about 12,000 tokens" in done.stderr
    assert "'smollm2' is loaded with 8,192 tokens a slot" in done.stderr


def test_aider_completes_its_exchange(daemon, tmp_path) -> None:
    url, proc = daemon
    message = ["--message", "Say hi", "--no-git", "--yes-always", "--no-check-update"]
    env, command = launch_print(url, "aider", *message, "--no-show-model-warnings")
    assert env["OLLAMA_API_BASE"] == url and "ollama_chat/gemma3" in command
    assert run_plain("aider", command, env, tmp_path).strip()
    served = requests_logged(proc, "/api/chat")
    assert served and all(" 200 " in line for line in served), served
