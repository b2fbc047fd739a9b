"""The load probe's verdict cache (native/verdicts.py): a verdict is kept per build key and
device, and a file that cannot be parsed reads as no verdicts at all."""

from __future__ import annotations

import json
from pathlib import Path

from localserve_native import verdicts
from localserve_native.hardware import Cpu
from localserve_native.verdicts import Trial, Verdict

KEY = "llama-cpp-python 0.3.36; system 0123456789ab; cpu Test CPU; flags ba9876543210"
DIED = Verdict.now("cpu", False, "with extra buffer types the worker died of SIGILL", 2.5)


def test_a_verdict_written_is_read_back_under_the_same_key(tmp_path: Path) -> None:
    path = tmp_path / "state" / "probe.json"
    verdicts.write(KEY, DIED, path)
    assert verdicts.read(KEY, path) == {"cpu": DIED}


def test_a_verdict_keeps_each_trials_kernels_and_cost(tmp_path: Path) -> None:
    path = tmp_path / "probe.json"
    trials = (
        Trial(True, "signal SIGILL"),
        Trial(False, None, ("cpu_mapped",), 6.12),
    )
    verdict = Verdict.now("cpu", False, "without them it decoded", 2.5, trials)
    verdicts.write(KEY, verdict, path)
    assert verdicts.read(KEY, path)["cpu"].trials == trials


def test_a_verdict_written_before_trials_were_kept_reads_with_none(tmp_path: Path) -> None:
    path = tmp_path / "probe.json"
    old = {k: v for k, v in DIED.to_json().items() if k != "trials"}
    path.write_text(json.dumps({"format": 1, "builds": {KEY: {"cpu": old}}}))
    assert verdicts.read(KEY, path) == {"cpu": DIED}


def test_a_different_key_reads_no_verdicts(tmp_path: Path) -> None:
    path = tmp_path / "probe.json"
    verdicts.write(KEY, DIED, path)
    assert verdicts.read(KEY.replace("0.3.36", "0.3.37"), path) == {}


def test_a_corrupt_file_reads_as_empty_and_is_replaced_by_the_next_write(tmp_path: Path) -> None:
    path = tmp_path / "probe.json"
    path.write_text('{"format": 1, "builds": {"' + KEY + '": {"cpu": {"devi')
    assert verdicts.read(KEY, path) == {}
    verdicts.write(KEY, DIED, path)
    assert verdicts.read(KEY, path) == {"cpu": DIED}


def test_a_write_keeps_the_verdicts_of_other_devices_and_builds(tmp_path: Path) -> None:
    path = tmp_path / "probe.json"
    gpu = Verdict.now("CUDA0", True, "decoded a token", 1.0)
    verdicts.write("other build", DIED, path)
    verdicts.write(KEY, DIED, path)
    verdicts.write(KEY, gpu, path)
    assert verdicts.read(KEY, path) == {"cpu": DIED, "CUDA0": gpu}
    assert verdicts.read("other build", path) == {"cpu": DIED}
    assert json.loads(path.read_text())["format"] == verdicts.FORMAT


def test_the_build_key_changes_with_the_cpus_flags_and_the_builds_system_info() -> None:
    cpu = Cpu("Test CPU", frozenset({"avx2", "amx_tile"}), "/proc/cpuinfo")
    key = verdicts.build_key("0.3.36", "CPU : AMX_INT8 = 1 |", cpu)
    assert key == verdicts.build_key("0.3.36", "CPU : AMX_INT8 = 1 |", cpu)
    assert key != verdicts.build_key("0.3.36", "CPU : AVX2 = 1 |", cpu)
    no_amx = Cpu("Test CPU", frozenset({"avx2"}), "/proc/cpuinfo")
    assert key != verdicts.build_key("0.3.36", "CPU : AMX_INT8 = 1 |", no_amx)
