"""`localserve native build BACKEND`: the recipes' flags, the pip command they make, and the
refusal when a prerequisite is missing. No test here runs a build: each would take minutes and
reinstall the library every other test loads; the CLI tests replace the runner to be sure."""

from __future__ import annotations

import shlex
import sys
import tomllib
from pathlib import Path

import pytest

from localserve.cli import main
from localserve.cli import native as native_cli
from localserve.native import recipes

ROOT = Path(__file__).resolve().parent.parent
XEON_AMX = frozenset(
    "avx avx2 fma f16c avx512f avx512bw avx512vl avx512_vnni amx_tile amx_int8 amx_bf16".split()
)
AVX2_ONLY = frozenset("avx avx2 fma f16c".split())


def test_every_backend_has_a_recipe() -> None:
    assert set(recipes.recipes()) == {"cpu", "cpu-noamx", "cuda", "vulkan", "rocm", "metal"}


def test_the_cpu_noamx_recipe_turns_native_off_and_every_amx_flag_off() -> None:
    args = recipes.cmake_args(recipes.recipes()["cpu-noamx"], XEON_AMX)
    assert "-DGGML_NATIVE=OFF" in args and "-DGGML_NATIVE=ON" not in args
    assert {"-DGGML_AVX=ON", "-DGGML_AVX2=ON", "-DGGML_FMA=ON", "-DGGML_F16C=ON"} <= set(args)
    assert {"-DGGML_AMX_TILE=OFF", "-DGGML_AMX_INT8=OFF", "-DGGML_AMX_BF16=OFF"} <= set(args)
    assert not [a for a in args if a.startswith("-DGGML_AMX") and a.endswith("=ON")]


def test_the_cpu_noamx_recipe_adds_avx512_only_where_the_cpu_has_avx512f() -> None:
    recipe = recipes.recipes()["cpu-noamx"]
    with_avx512 = recipes.cmake_args(recipe, XEON_AMX)
    assert {"-DGGML_AVX512=ON", "-DGGML_AVX512_VNNI=ON"} <= set(with_avx512)
    assert not [a for a in recipes.cmake_args(recipe, AVX2_ONLY) if "AVX512" in a]


def test_the_build_command_bypasses_pips_wheel_cache_and_reinstalls() -> None:
    plan = recipes.plan(recipes.recipes()["cuda"], AVX2_ONLY)
    assert list(plan.command) == [
        sys.executable, "-m", "pip", "install", "--no-cache-dir", "--force-reinstall", "--no-deps",
        "llama-cpp-python==0.3.36",
    ]  # fmt: skip
    assert plan.env["CMAKE_ARGS"] == "-DGGML_CUDA=ON" and plan.env["FORCE_CMAKE"] == "1"


def test_the_printed_shell_line_is_the_command_and_its_environment() -> None:
    plan = recipes.plan(recipes.recipes()["cpu-noamx"], XEON_AMX)
    line = plan.shell_line()
    assert line.startswith("CMAKE_ARGS='-DGGML_NATIVE=OFF ")
    words = shlex.split(line)
    assigns = [f"{name}={value}" for name, value in plan.env.items()]
    assert words == [*assigns, *plan.command]


def test_the_rebuilt_package_is_the_version_pyproject_pins() -> None:
    pins = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    assert recipes.PACKAGE in pins


def test_metal_builds_only_on_macos() -> None:
    metal = recipes.recipes()["metal"]
    assert recipes.missing(metal, which=lambda name: "/usr/bin/" + name, system="Linux") == [
        "this is Linux, not macOS"
    ]
    assert recipes.missing(metal, which=lambda name: "/usr/bin/" + name, system="Darwin") == []


@pytest.fixture
def no_nvcc(monkeypatch: pytest.MonkeyPatch) -> None:
    """A machine with a C++ compiler and no CUDA toolkit, whose builds must never run."""
    monkeypatch.setattr(
        recipes.shutil, "which", lambda name: None if name == "nvcc" else f"/usr/bin/{name}"
    )

    def no_build(plan: recipes.Plan) -> int:
        raise AssertionError(f"a build ran: {plan.shell_line()}")

    monkeypatch.setattr(native_cli, "run_build", no_build)


@pytest.mark.usefixtures("no_nvcc")
def test_a_dry_run_of_the_cuda_build_prints_the_command_even_without_nvcc(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["native", "build", "cuda", "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "CMAKE_ARGS='-DGGML_CUDA=ON'" in out
    pip = "-m pip install --no-cache-dir --force-reinstall --no-deps llama-cpp-python==0.3.36"
    assert pip in out


@pytest.mark.usefixtures("no_nvcc")
def test_a_cuda_build_without_nvcc_refuses_naming_nvcc(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["native", "build", "cuda"]) == 1
    assert "nvcc is not on PATH" in capsys.readouterr().err
