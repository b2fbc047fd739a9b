"""`localserve doctor`: it runs on any machine and exits 0, shows the CPU and the llama.cpp build,
reads the load probe's verdicts under the key the probe writes them, and names the fix."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from localserve.cli.doctor import render
from localserve_native import hardware, report, verdicts
from localserve_native.report import Facts
from localserve_native.verdicts import Trial, Verdict

DOCTOR_TIMEOUT_S = 180.0
AMX_FLAGS = frozenset({"avx2", "avx512f", "amx_tile", "amx_int8", "amx_bf16"})
DIED = Verdict.now("cpu", False, "with extra buffer types the worker died of SIGILL", 3.0)


def doctor(*args: str, state: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "XDG_STATE_HOME": str(state), "NO_COLOR": "1"}
    return subprocess.run(
        [sys.executable, "-m", "localserve", "doctor", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=DOCTOR_TIMEOUT_S,
        stdin=subprocess.DEVNULL,
    )


def test_doctor_exits_0_and_prints_the_cpu_and_llama_cpps_system_info(tmp_path: Path) -> None:
    as_json = doctor("--json", state=tmp_path)
    assert as_json.returncode == 0, as_json.stderr
    found: dict[str, Any] = json.loads(as_json.stdout)
    assert set(found) == {"hardware", "llama_cpp", "probe", "advice"}
    info = found["llama_cpp"]["system_info"]
    assert info.startswith("CPU :"), info
    assert found["probe"]["verdicts"] == report.NOT_PROBED

    text = doctor(state=tmp_path)
    assert text.returncode == 0, text.stderr
    assert text.stdout.startswith("CPU\n")
    assert "  model" in text.stdout and info in text.stdout


def test_doctor_shows_the_verdict_the_probe_cached_for_this_build(tmp_path: Path) -> None:
    # The key as the probe's worker makes it, in-process; the doctor makes its own in a child.
    verdicts.write(verdicts.build_key(), DIED, tmp_path / "localserve" / "probe.json")
    found = json.loads(doctor("--json", state=tmp_path).stdout)
    assert found["probe"]["verdicts"] == {"cpu": DIED.to_json()}


def test_doctor_shows_each_trials_kernels_and_measured_cost() -> None:
    trials = (Trial(True, "signal SIGILL"), Trial(False, None, ("cpu_mapped",), 6.25))
    verdict = Verdict.now("cpu", False, "without them it decoded", 3.0, trials)
    text = render({"probe": {"verdicts": {"cpu": verdict.to_json()}}})
    assert "with extra buffer types: failed, signal SIGILL" in text
    assert "without them: weights in cpu_mapped; 6.25 ms a token (160 tok/s)" in text


def test_doctor_recommends_cpu_noamx_when_extra_bufts_died_on_an_amx_cpu() -> None:
    facts = Facts("Linux", "x86_64", AMX_FLAGS, {"cpu": DIED}, gpu_offload=False, amx_kernels=True)
    [advice] = report.recommend(facts)
    assert advice.fix == "localserve native build cpu-noamx" and advice.optional


def test_doctor_recommends_nothing_when_extra_bufts_survived() -> None:
    survived = Verdict.now("cpu", True, "decoded a token with extra buffer types", 3.0)
    facts = Facts("Linux", "x86_64", AMX_FLAGS, {"cpu": survived}, gpu_offload=False)
    assert report.recommend(facts) == []


def test_doctor_recommends_the_cuda_build_for_an_nvidia_gpu_the_build_cannot_use() -> None:
    facts = Facts("Linux", "x86_64", AMX_FLAGS, {}, gpu_offload=False, nvidia_gpus=1, vulkan_gpus=1)
    assert [a.fix for a in report.recommend(facts)] == ["localserve native build cuda"]


def test_doctor_recommends_the_vulkan_build_for_a_vulkan_gpu_without_cuda() -> None:
    facts = Facts("Linux", "x86_64", frozenset(), {}, gpu_offload=False, vulkan_gpus=1)
    assert [a.fix for a in report.recommend(facts)] == ["localserve native build vulkan"]


def test_cpuinfo_gives_the_model_and_the_first_cores_flags() -> None:
    text = (
        "processor\t: 0\nmodel name\t: Intel(R) Xeon(R) Platinum 8480+\n"
        "flags\t\t: fpu avx avx2 avx512f amx_tile amx_int8\n\n"
        "processor\t: 1\nmodel name\t: Intel(R) Xeon(R) Platinum 8480+\nflags\t\t: fpu\n"
    )
    cpu = hardware.parse_cpuinfo(text, machine="x86_64")
    assert cpu.model == "Intel(R) Xeon(R) Platinum 8480+" and cpu.has_amx
    assert cpu.features()["avx512f"] and not cpu.features()["avx512_vnni"]


def test_vulkaninfo_lists_gpus_and_tells_software_renderers_apart() -> None:
    text = (
        "Devices:\n========\nGPU0:\n\tvendorID = 0x1002\n"
        "\tdeviceType = PHYSICAL_DEVICE_TYPE_DISCRETE_GPU\n\tdeviceName = AMD Radeon RX 7900 XTX\n"
        "GPU1:\n\tdeviceType = PHYSICAL_DEVICE_TYPE_CPU\n\tdeviceName = llvmpipe (LLVM 15.0.7)\n"
    )
    gpus = hardware.parse_vulkaninfo(text)
    assert [(g.name, g.is_gpu) for g in gpus] == [
        ("AMD Radeon RX 7900 XTX", True),
        ("llvmpipe (LLVM 15.0.7)", False),
    ]


def test_doctor_recommends_a_build_for_this_cpu_when_llama_cpp_does_not_load() -> None:
    facts = Facts("Linux", "x86_64", frozenset(), {}, None, llama_broken="died of SIGILL")
    assert [a.fix for a in report.recommend(facts)] == ["localserve native build cpu"]
