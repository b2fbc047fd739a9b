"""The real coding agents, unmodified, end to end against a live daemon (#24): Claude Code
(`claude -p`, through Anthropic's Messages API) and Codex (`codex exec --oss`, through Ollama's
start-up calls and OpenAI's Responses API), at the versions tests/support/agent_clis.py pins.

Their first prompts are 9,000 to 12,000 tokens, so the daemon serves Gemma 3 270M with 32k
tokens a slot, imported into its store as `gemma3` (Codex looks the name up in /api/tags).
Codex sends no max_output_tokens: the daemon's `--max-tokens` caps the answers, and both agents
report the cut (Claude Code's "exceeded the 32 output token maximum", Codex's "Incomplete
response returned, reason: max_output_tokens"). A 270M model writes nothing useful; what is
tested is that every exchange completes: each agent receives the model's streamed text.
"""

from __future__ import annotations

import json
import os
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
    store = tmp_path_factory.mktemp("agents-store")
    env = {"LOCALSERVE_MODELS": str(store)}
    proc, url = start_daemon(
        ["--no-default-model", "--parallel", "1", "--ctx", "32768", "--max-tokens", str(CAP)],
        env=env,
    )
    try:
        port = url.rsplit(":", 1)[1]
        subprocess.run(
            [
                sys.executable,
                "-m",
                "localserve",
                "import",
                gemma_file(),
                "--name",
                "gemma3",
                "--port",
                port,
            ],
            env={**os.environ, **env},
            check=True,
            capture_output=True,
            timeout=120,
        )
        yield url, proc
    finally:
        discard(proc)


def requests_logged(proc: subprocess.Popen, path: str) -> list[str]:
    return [
        line
        for line in log_text(proc.log_path).splitlines()  # type: ignore[attr-defined]
        if f" {path} " in line and "localserve.requests" in line
    ]


def run(program: Path, args: list[str], env: dict[str, str], home: Path) -> list[dict]:
    """The agent's JSON lines, whatever it exits with (a capped answer is an error to it)."""
    done = subprocess.run(
        [str(program), *args],
        env={**os.environ, "HOME": str(home), **env},
        cwd=home,
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT_S,
    )
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
    env = {
        "ANTHROPIC_BASE_URL": url,
        "ANTHROPIC_API_KEY": "sk-local",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "CLAUDE_CODE_MAX_OUTPUT_TOKENS": str(CAP),
        "ANTHROPIC_DEFAULT_HAIKU_MODEL": "gemma3",
    }
    lines = run(
        claude,
        ["-p", "Say hi", "--model", "gemma3", "--output-format", "stream-json", "--verbose"],
        env,
        tmp_path,
    )
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
    lines = run(
        codex,
        [
            "exec",
            "--json",
            "--oss",
            "--local-provider",
            "ollama",
            "-m",
            "gemma3",
            "--skip-git-repo-check",
            "Say hi",
        ],
        {"CODEX_OSS_BASE_URL": f"{url}/v1"},
        tmp_path,
    )
    said = [
        line["item"]["text"]
        for line in lines
        if line.get("type") == "item.completed" and line["item"].get("type") == "agent_message"
    ]
    assert said and said[0], lines
    assert any("max_output_tokens" in json.dumps(line) for line in lines), lines
    for path in ("/api/tags", "/v1/responses"):  # /api/version is a poll, logged at debug
        served = requests_logged(proc, path)
        assert served and all(" 200 " in line for line in served), (path, served)
