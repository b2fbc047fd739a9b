"""What `localserve launch` gives each agent (cli/launch.py), as pure logic: the context of the
model an alias stands for, and a keyed daemon's key in every agent's own configuration."""

from __future__ import annotations

import http.server
import json
import os
import stat
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from localserve.cli.common import Failure
from localserve.cli.launch import (
    AGENTS,
    ANY_KEY,
    KEY_ENV,
    Setup,
    check_key,
    loaded_context,
    write_private,
)

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

KEY = "s3cret-key"
URL = "http://127.0.0.1:11434"


def setup(tmp_path: Path, keyed: bool = True, url: str = URL) -> Setup:
    return Setup(url, KEY if keyed else ANY_KEY, keyed, "sonnet", 32768, 8192, tmp_path)


def merge(into: dict[str, Any], more: dict[str, Any]) -> None:
    """Dotted keys set one table's entries one -c at a time, as Codex applies them."""
    for key, value in more.items():
        if isinstance(value, dict) and isinstance(into.get(key), dict):
            merge(into[key], value)
        else:
            into[key] = value


def nothing_running() -> list[dict[str, object]]:
    raise AssertionError("the load's answer gave the context: /api/ps is not asked")


def test_an_alias_gets_the_context_its_model_loaded_with() -> None:
    load = {"name": "gemma3:latest", "context_length": 32768}
    assert loaded_context(load, nothing_running, "sonnet") == 32768


def test_without_a_context_in_the_loads_answer_ps_is_read_under_the_models_own_name() -> None:
    running = [{"name": "gemma3:latest", "context_length": 4096}]
    assert loaded_context({"name": "gemma3:latest"}, lambda: running, "sonnet") == 4096


def test_a_model_found_nowhere_has_no_context() -> None:
    assert loaded_context({}, lambda: [], "sonnet") == 0


def test_codex_on_a_daemon_without_a_key_runs_in_its_ollama_mode(tmp_path: Path) -> None:
    s = setup(tmp_path, keyed=False)
    assert AGENTS["codex"].env(s) == {"CODEX_OSS_BASE_URL": f"{URL}/v1"}
    assert AGENTS["codex"].args(s)[:5] == ["--oss", "--local-provider", "ollama", "-m", "sonnet"]


def test_codex_on_a_keyed_daemon_gets_a_provider_that_reads_the_key_from_its_variable(
    tmp_path: Path,
) -> None:
    s = setup(tmp_path)
    assert AGENTS["codex"].env(s) == {KEY_ENV: KEY}
    args = AGENTS["codex"].args(s)
    assert "--oss" not in args
    config: dict[str, Any] = {}
    for flag, value in zip(args, args[1:]):
        if flag == "-c":  # each is TOML, as Codex reads -c
            merge(config, tomllib.loads(value))
    assert config["model_provider"] == "localserve"
    assert config["model_providers"] == {
        "localserve": {
            "name": "localserve",
            "base_url": f"{URL}/v1",
            "env_key": KEY_ENV,
            "wire_api": "responses",
        }
    }
    assert config["model_context_window"] == 32768


def test_continue_is_given_the_key_in_its_config(tmp_path: Path) -> None:
    (model,) = json.loads(AGENTS["continue"].files(setup(tmp_path))["continue.yaml"])["models"]
    assert model["apiKey"] == KEY


@pytest.mark.parametrize("name", sorted(AGENTS))
def test_every_agent_is_handed_a_keyed_daemons_key(tmp_path: Path, name: str) -> None:
    agent, s = AGENTS[name], setup(tmp_path)
    assert KEY in json.dumps([agent.env(s), agent.args(s), agent.files(s)])


def test_an_agents_config_file_is_readable_by_its_user_alone(tmp_path: Path) -> None:
    path = tmp_path / "continue.yaml"
    path.write_text("old")
    path.chmod(0o644)
    write_private(path, "apiKey: x\n")
    assert path.read_text() == "apiKey: x\n"
    if os.name == "posix":
        assert stat.S_IMODE(path.stat().st_mode) == 0o600


class _Keyed(http.server.BaseHTTPRequestHandler):
    """A daemon that wants KEY, as the guard answers: 401 without it."""

    def do_GET(self) -> None:
        self.send_response(200 if self.headers.get("Authorization") == f"Bearer {KEY}" else 401)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def keyed_url() -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Keyed)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def test_a_key_the_daemon_refuses_stops_the_launch_and_says_where_the_key_goes(
    tmp_path: Path, keyed_url: str
) -> None:
    with pytest.raises(Failure, match="LOCALSERVE_API_KEY"):
        check_key(setup(tmp_path, keyed=False, url=keyed_url))


def test_the_daemons_own_key_lets_the_launch_go_on(tmp_path: Path, keyed_url: str) -> None:
    check_key(setup(tmp_path, url=keyed_url))
