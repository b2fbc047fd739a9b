"""`localserve native build BACKEND`: the recipes' flags, the pip command they make, and the
refusal when a prerequisite is missing. No test here runs a build: each would take minutes and
reinstall the library every other test loads; the CLI tests replace the runner to be sure."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

import pytest
import tomllib

from localserve.cli import main
from localserve.cli import native as native_cli
from localserve_native import cuda_toolkit, recipes, wheels
from tests.support.helpers import REPO

ROOT = REPO
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


def test_the_build_bypasses_pips_wheel_cache_and_the_install_reinstalls() -> None:
    plan = recipes.plan(recipes.recipes()["cuda"], AVX2_ONLY)
    assert list(plan.wheel_command()) == [
        sys.executable,
        "-m",
        "pip",
        "wheel",
        "--no-cache-dir",
        "--no-deps",
        "-w",
        str(plan.wheel_dir),
        "llama-cpp-python==0.3.36",
    ]
    assert list(plan.install_command("x.whl")) == [
        sys.executable,
        "-m",
        "pip",
        "install",
        "--force-reinstall",
        "--no-deps",
        "x.whl",
    ]
    assert plan.env["CMAKE_ARGS"].startswith("-DGGML_CUDA=ON") and plan.env["FORCE_CMAKE"] == "1"


def test_a_wheel_is_kept_under_a_key_of_every_input_of_its_build() -> None:
    recipe = recipes.recipes()["cpu-noamx"]
    with_avx512, without = recipes.plan(recipe, XEON_AMX), recipes.plan(recipe, AVX2_ONLY)
    assert with_avx512.key != without.key, "other flags, another wheel"
    assert with_avx512.key == recipes.plan(recipe, XEON_AMX).key
    assert with_avx512.wheel_dir.name == f"cpu-noamx-{with_avx512.key}"


def test_the_vulkan_guard_wraps_its_lines_and_builds_the_instance_without_layer_settings() -> None:
    (guard,) = recipes.recipes()["vulkan"].guards
    source = "\n".join(["a", guard.first, "b", guard.last, "c"])
    assert wheels.guarded(source, guard).split("\n") == [
        "a",
        f"#if {guard.condition}",
        guard.first,
        "b",
        guard.last,
        "#else",
        guard.otherwise,
        "#endif",
        "c",
    ]


def test_a_guard_whose_lines_are_gone_refuses_the_build() -> None:
    (guard,) = recipes.recipes()["vulkan"].guards
    with pytest.raises(wheels.BuildFailed, match="out of date"):
        wheels.guarded("int main() {}\n", guard)


def test_a_kept_wheel_is_installed_without_building_again(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("LOCALSERVE_WHEELS", str(tmp_path))
    plan = recipes.plan(recipes.recipes()["vulkan"], AVX2_ONLY)
    plan.wheel_dir.mkdir(parents=True)
    kept = plan.wheel_dir / "llama_cpp_python-0.3.36-cp311-cp311-linux_x86_64.whl"
    kept.write_bytes(b"")
    ran: list[tuple[str, ...]] = []
    wheel, built = wheels.build(plan, run=lambda command, env: ran.append(command) or 0)
    assert (wheel, built, ran) == (kept, False, [])


def test_the_printed_shell_line_is_the_command_and_its_environment() -> None:
    plan = recipes.plan(recipes.recipes()["cpu-noamx"], XEON_AMX)
    line = plan.shell_line()
    assert line.startswith("CMAKE_ARGS='-DGGML_NATIVE=OFF ")
    words = shlex.split(line)
    assigns = [f"{name}={value}" for name, value in plan.env.items()]
    assert words == [*assigns, *plan.wheel_command()]


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

    def no_build(plan: recipes.Plan) -> Path:
        raise AssertionError(f"a build ran: {plan.shell_line()}")

    monkeypatch.setattr(native_cli, "run_build", no_build)


@pytest.mark.usefixtures("no_nvcc")
def test_a_dry_run_of_the_cuda_build_prints_the_command_even_without_nvcc(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["native", "build", "cuda", "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "CMAKE_ARGS='-DGGML_CUDA=ON'" in out
    assert "-m pip wheel --no-cache-dir --no-deps -w " in out
    assert "llama-cpp-python==0.3.36" in out and "-m pip install --force-reinstall" in out


@pytest.mark.usefixtures("no_nvcc")
def test_a_cuda_build_without_nvcc_refuses_naming_nvcc(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["native", "build", "cuda"]) == 1
    assert "nvcc is not on PATH" in capsys.readouterr().err


def test_a_cuda_toolkit_without_a_driver_builds_without_the_vmm_pool_that_links_libcuda(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "lib64").mkdir()
    (tmp_path / "lib64" / "libcublas.so.13").write_bytes(b"")
    monkeypatch.setattr(cuda_toolkit.ctypes.util, "find_library", lambda name: None)
    assert cuda_toolkit.cmake_flags(tmp_path) == ["-DGGML_CUDA_NO_VMM=ON"]


def test_a_cuda_toolkit_without_cublas_takes_pypis(tmp_path: Path, monkeypatch) -> None:
    (tmp_path / "lib64").mkdir()
    wheel = tmp_path / "site" / "cu13"
    (wheel / "lib").mkdir(parents=True)
    (wheel / "include").mkdir()
    for name in ("lib/libcublas.so.13", "lib/libcublasLt.so.13", "include/cublas_v2.h"):
        (wheel / name).write_bytes(b"")
    monkeypatch.setattr(cuda_toolkit, "pip_cublas", lambda: wheel)
    monkeypatch.setattr(cuda_toolkit.ctypes.util, "find_library", lambda name: "libcuda.so.1")
    assert cuda_toolkit.cmake_flags(tmp_path) == [
        f"-DCUDA_cublas_LIBRARY={wheel}/lib/libcublas.so.13",
        f"-DCUDA_cublasLt_LIBRARY={wheel}/lib/libcublasLt.so.13",
        f"-DCMAKE_CUDA_FLAGS=-I{wheel}/include",
        f"-DCMAKE_CXX_FLAGS=-I{wheel}/include",
    ]
