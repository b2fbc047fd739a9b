"""The probe's remedy build (native/remedy.py): llama.cpp without AMX, built once through its
recipe, unpacked beside its wheel for a worker to run from. The build is faked: its runner
writes the wheel pip would."""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest

from localserve_native import recipes, remedy, wheels


@pytest.fixture
def build(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> recipes.Plan:
    monkeypatch.setenv("LOCALSERVE_WHEELS", str(tmp_path))
    monkeypatch.setattr(recipes.shutil, "which", lambda name: f"/usr/bin/{name}")
    return remedy.plan()


def fake_pip(ran: list[tuple[str, ...]]) -> wheels.Runner:
    """A runner that, asked for a wheel, writes one holding a llama_cpp package into -w's folder."""

    def run(command: tuple[str, ...], env: dict[str, str]) -> int:
        ran.append(command)
        out = Path(command[command.index("-w") + 1])
        out.mkdir(parents=True, exist_ok=True)
        wheel = out / "llama_cpp_python-0.3.36-cp311-cp311-linux_x86_64.whl"
        with zipfile.ZipFile(wheel, "w") as archive:
            archive.writestr("llama_cpp/__init__.py", "__version__ = '0.3.36'\n")
        return 0

    return run


def test_the_remedy_is_the_cpu_noamx_recipe_built_with_amx_off(build: recipes.Plan) -> None:
    assert build.recipe.name == "cpu-noamx"
    assert "-DGGML_NATIVE=OFF" in build.env["CMAKE_ARGS"]


def test_the_build_is_unpacked_under_its_key_for_a_worker_to_run_from(
    build: recipes.Plan,
) -> None:
    ran: list[tuple[str, ...]] = []
    folder = remedy.prepare(build, fake_pip(ran))
    assert folder == build.wheel_dir / "site"
    assert (folder / "llama_cpp" / "__init__.py").is_file()
    assert len(ran) == 1 and "wheel" in ran[0]


def test_a_build_made_before_is_kept_and_not_built_again(build: recipes.Plan) -> None:
    ran: list[tuple[str, ...]] = []
    first = remedy.prepare(build, fake_pip(ran))
    assert remedy.prepare(build, fake_pip(ran)) == first
    assert remedy.ready(build) == first
    assert len(ran) == 1


def test_a_failed_build_leaves_nothing_that_passes_for_a_finished_one(
    build: recipes.Plan,
) -> None:
    with pytest.raises(wheels.BuildFailed, match="pip exited with 1"):
        remedy.prepare(build, lambda command, env: 1)
    assert remedy.ready(build) is None


def test_a_machine_that_cannot_build_says_what_it_lacks(
    build: recipes.Plan, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(recipes.shutil, "which", lambda name: None)
    with pytest.raises(wheels.BuildFailed, match="no C\\+\\+ compiler"):
        remedy.prepare(build, fake_pip([]))


def test_the_builds_folder_comes_first_on_the_workers_python_path() -> None:
    assert remedy.python_path("/b/site", "/x:/y") == "/b/site:/x:/y"
    assert remedy.python_path("/b/site", None) == "/b/site"
