"""The probe's remedy, live: a verdict that names a build moves the CPU worker onto it (on any
host), and on a CPU with AMX whose llama.cpp dies in the AMX kernels the daemon builds llama.cpp
without AMX in the background, then runs from it with the extra buffer types on."""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path

import llama_cpp
import openai
import pytest

from localserve.engine.worker_client.probe import build_key_of
from localserve.engine.worker_client.remedy import READY
from localserve.ground.settings import Settings
from localserve_native import hardware, verdicts
from tests.support.daemons import get_json, poll, stop_daemon
from tests.support.live import DEFAULT_ARGS, MODEL, start_daemon

# The remedy's build compiles llama.cpp: minutes on a small machine.
BUILD_TIMEOUT_S = 40 * 60


def worker_python_path(url: str) -> str:
    pid = get_json(f"{url}/health")["devices"]["cpu"]["pid"]
    environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    found = [v for v in environ if v.startswith(b"PYTHONPATH=")]
    return found[0].decode().split("=", 1)[1] if found else ""


def answer(url: str) -> str:
    client = openai.OpenAI(base_url=f"{url}/v1", api_key="unused", timeout=120)
    chat = client.chat.completions.create(
        model=MODEL, messages=[{"role": "user", "content": "Say hi."}], max_tokens=4
    )
    return chat.choices[0].message.content or ""


def with_state(tmp_path: Path) -> dict[str, str]:
    """A state folder of the test's own: its verdicts must not reach the suite's daemons."""
    return {"XDG_STATE_HOME": str(tmp_path / "state")}


def test_a_verdict_that_names_a_build_runs_the_cpu_worker_from_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The build here is the venv's own llama_cpp, seen through a folder of its own: the
    # worker's import path is what moves, whatever the build holds.
    build = tmp_path / "site"
    build.mkdir()
    (build / "llama_cpp").symlink_to(Path(llama_cpp.__file__).parent)
    env = with_state(tmp_path)
    monkeypatch.setenv("XDG_STATE_HOME", env["XDG_STATE_HOME"])
    key = build_key_of("cpu", Settings())
    died = verdicts.Verdict.now("cpu", False, "forced: the extra buffer types died", 1.0)
    verdicts.write(key, replace(died, build=str(build)))
    proc, url = start_daemon(DEFAULT_ARGS, env=env)
    try:
        assert answer(url)
        assert worker_python_path(url).split(os.pathsep)[0] == str(build)
    finally:
        stop_daemon(proc)


@pytest.mark.skipif(not hardware.read_cpu().has_amx, reason="the remedy is for CPUs with AMX")
def test_on_a_cpu_with_amx_the_daemon_builds_llama_cpp_without_amx_and_runs_from_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    env = {**with_state(tmp_path), "LOCALSERVE_NO_NATIVE_BUILD": "0"}
    monkeypatch.setenv("XDG_STATE_HOME", env["XDG_STATE_HOME"])
    key = build_key_of("cpu", Settings())
    proc, url = start_daemon(DEFAULT_ARGS, env=env)
    try:
        assert answer(url)  # served by the fallback meanwhile
        if verdicts.read(key)["cpu"].use_extra_bufts:
            pytest.skip("this build's extra buffer types survive here: nothing to mend")
        poll(
            "the build without AMX",
            lambda: get_json(f"{url}/health")["devices"]["cpu"]["native_build"] == READY,
            BUILD_TIMEOUT_S,
            interval_s=5,
        )
    finally:
        stop_daemon(proc)
    build = verdicts.read(key)["cpu"].build
    assert build
    proc, url = start_daemon(DEFAULT_ARGS, env=env)
    try:
        assert answer(url)
        assert worker_python_path(url).split(os.pathsep)[0] == build
        moved = build_key_of("cpu", Settings(), build)
        assert verdicts.read(moved)["cpu"].use_extra_bufts
    finally:
        stop_daemon(proc)
