"""The remedy where the probe saw llama.cpp's extra buffer types die (engine/worker_client/
remedy.py): on a CPU with AMX it builds llama.cpp without AMX in the background, probes that
build, and names it in the verdict for the CPU worker's next start. The build and the probe's
workers are faked; tests/live/test_native_remedy.py runs them where the CPU has AMX."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from localserve.engine.worker_client import remedy as daemon_remedy
from localserve.engine.worker_client.remedy import READY, STOPPED, Remedy
from localserve.ground.settings import Settings
from localserve_native import verdicts
from localserve_native.wheels import BuildFailed, Runner

KEY = "llama-cpp-python 0.3.36; system 0123456789ab; cpu Xeon; flags ba9876543210"
DIED = verdicts.Verdict.now("cpu", False, "with extra buffer types the worker died of SIGILL", 2)


@pytest.fixture
def probed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, str]]:
    """The venv's build has its SIGILL verdict; the probe of another build is faked: it
    records (key, build) and answers that the extra buffer types decode."""
    monkeypatch.setattr(verdicts, "cache_path", lambda: tmp_path / "probe.json")
    verdicts.write(KEY, DIED)
    asked: list[tuple[str, str]] = []
    monkeypatch.setattr(daemon_remedy, "build_key_of", lambda device, settings, build: "noamx")

    def verdict(device: str, key: str, settings: Settings, build: str = "") -> bool:
        asked.append((key, build))
        return True

    monkeypatch.setattr(daemon_remedy, "extra_bufts_verdict", verdict)
    return asked


def made(folder: Path) -> Path:
    (folder / "llama_cpp").mkdir(parents=True)
    return folder


def run(remedy: Remedy, device: str = "cpu") -> None:
    thread = remedy.start(device, KEY)
    assert thread is not None
    thread.join(10)


def test_on_a_cpu_with_amx_the_build_is_made_probed_and_named_in_the_verdict(
    tmp_path: Path, probed: list[tuple[str, str]]
) -> None:
    build = made(tmp_path / "site")
    remedy = Remedy(Settings(), prepare=lambda _: build, has_amx=lambda: True)
    run(remedy)
    assert probed == [("noamx", str(build))]
    assert verdicts.read(KEY)["cpu"].build == str(build)
    assert remedy.state["cpu"] == READY


def test_a_cpu_without_amx_builds_nothing(probed: list[tuple[str, str]]) -> None:
    remedy = Remedy(Settings(), prepare=pytest.fail, has_amx=lambda: False)
    assert remedy.start("cpu", KEY) is None
    assert "cpu" not in remedy.state


def test_no_native_build_keeps_the_fallback_and_builds_nothing(
    probed: list[tuple[str, str]],
) -> None:
    remedy = Remedy(Settings(no_native_build=True), prepare=pytest.fail, has_amx=lambda: True)
    assert remedy.start("cpu", KEY) is None


def test_only_the_cpu_has_a_remedy(probed: list[tuple[str, str]]) -> None:
    remedy = Remedy(Settings(), prepare=pytest.fail, has_amx=lambda: True)
    assert remedy.start("CUDA0", KEY) is None


def test_the_build_runs_once_per_daemon(tmp_path: Path, probed: list[tuple[str, str]]) -> None:
    remedy = Remedy(Settings(), prepare=lambda _: made(tmp_path / "site"), has_amx=lambda: True)
    run(remedy)
    assert remedy.start("cpu", KEY) is None


def test_a_failed_build_is_shown_and_the_verdict_names_no_build(
    probed: list[tuple[str, str]],
) -> None:
    def fails(_: Runner) -> Path:
        raise BuildFailed("the build failed: pip exited with 1 (its output is above)")

    remedy = Remedy(Settings(), prepare=fails, has_amx=lambda: True)
    run(remedy)
    assert remedy.state["cpu"].startswith("failed: the build failed: pip exited with 1")
    assert verdicts.read(KEY)["cpu"].build == ""


def test_a_build_whose_extra_buffer_types_fail_too_is_not_named(
    tmp_path: Path, probed: list[tuple[str, str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(daemon_remedy, "extra_bufts_verdict", lambda *args: False)
    remedy = Remedy(Settings(), prepare=lambda _: made(tmp_path / "site"), has_amx=lambda: True)
    run(remedy)
    assert remedy.state["cpu"] == "failed: the build without AMX fails with extra buffer types too"
    assert verdicts.read(KEY)["cpu"].build == ""


def test_an_old_verdict_without_a_build_still_reads() -> None:
    raw = {k: v for k, v in DIED.to_json().items() if k != "build"}
    assert verdicts.Verdict.from_json(raw) == DIED


def test_a_build_under_way_ends_with_the_daemon_and_is_not_called_failed(
    tmp_path: Path, probed: list[tuple[str, str]]
) -> None:
    asked = threading.Event()

    def building(run: Runner) -> Path:
        asked.set()
        if run(("sleep", "60"), {}) != 0:
            raise BuildFailed("the build failed: pip exited with -15 (its output is above)")
        return made(tmp_path / "site")

    remedy = Remedy(Settings(), prepare=building, has_amx=lambda: True)
    thread = remedy.start("cpu", KEY)
    assert thread is not None and asked.wait(5)
    remedy.stop()
    thread.join(10)
    assert not thread.is_alive()
    assert remedy.state["cpu"] == STOPPED
    assert probed == []
