"""`localserve doctor`'s findings: the hardware, the installed llama.cpp build, the load probe's
verdicts for that build, and what is wrong with the exact command that fixes it.

`gather()` returns one JSON-ready dict. Each probe is guarded on its own and a failure reads
"unknown (reason)" in its place (a tool not installed: "not found"), so one broken tool never
hides the rest. `recommend()` is the judgement, kept pure: facts in, advice out.
"""

from __future__ import annotations

import platform
import shlex
import sys
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from importlib import metadata
from typing import Any

from localserve_native import build_info, hardware, recipes, verdicts
from localserve_native.verdicts import Verdict

NOT_FOUND = "not found"
NOT_INSTALLED = "not installed"
NOT_PROBED = "not probed yet"
ONNX_GENAI_CPU = "onnxruntime-genai"
ONNX_GENAI_CUDA = "onnxruntime-genai-cuda"


@dataclass(frozen=True)
class Advice:
    problem: str
    fix: str | None  # the exact command, or None where no command fixes it
    optional: bool = False  # things work as they are; the fix makes them better


@dataclass(frozen=True)
class Facts:
    """What recommend() judges; None where a probe could not tell."""

    system: str  # platform.system()
    machine: str  # platform.machine()
    cpu_flags: frozenset[str]
    verdicts: Mapping[str, Verdict]  # this build's, by device
    gpu_offload: bool | None
    llama_broken: str | None = None  # why llama.cpp would not load here, when it would not
    amx_kernels: bool | None = None  # the build's system info lists AMX_INT8
    nvidia_gpus: int = 0
    amd_gpus: int = 0
    vulkan_gpus: int = 0  # real GPUs only: software renderers left out
    onnx_genai: str | None = None  # the installed distribution, or None
    onnx_genai_version: str | None = None
    onnx_cuda: bool | None = None
    python: str = field(default_factory=lambda: sys.executable)


def _build(name: str) -> str:
    return f"localserve native build {name}"


def _needs(name: str) -> str:
    try:
        return recipes.recipes()[name].needs
    except Exception:  # the advice stands without the note
        return ""


def _broken_build(facts: Facts) -> Advice | None:
    if facts.llama_broken is None:
        return None
    # Most often a library built for another CPU (a copied venv, a wheel from elsewhere): one
    # built here, for this CPU, loads.
    return Advice(
        f"the installed llama.cpp does not load on this machine ({facts.llama_broken}); a build "
        "for this CPU replaces it",
        _build("cpu"),
    )


def _gpu_build(facts: Facts) -> Advice | None:
    if facts.gpu_offload is not False:
        return None
    # The vendor's own backend first: CUDA and ROCm beat Vulkan on their own GPUs.
    for count, vendor, recipe in (
        (facts.nvidia_gpus, "an NVIDIA GPU", "cuda"),
        (facts.amd_gpus, "an AMD GPU (rocm-smi)", "rocm"),
        (facts.vulkan_gpus, "a Vulkan GPU", "vulkan"),
    ):
        if count:
            needs = _needs(recipe)
            return Advice(
                f"{vendor} is present, but this llama.cpp build cannot offload to a GPU: "
                f"models run on the CPU" + (f" (the build needs {needs})" if needs else ""),
                _build(recipe),
            )
    if facts.system == "Darwin" and facts.machine.lower() in ("arm64", "aarch64"):
        return Advice(
            "this Mac has an Apple GPU, but this llama.cpp build cannot offload to it",
            _build("metal"),
        )
    return None


def _cpu_verdict(facts: Facts) -> Advice | None:
    cpu = next((v for d, v in facts.verdicts.items() if d.lower() == "cpu"), None)
    if cpu is None or cpu.use_extra_bufts:
        return None
    has_amx = any(flag in facts.cpu_flags for flag in hardware.AMX)
    if has_amx and facts.amx_kernels is not False:
        return Advice(
            "this CPU has AMX and the load probe found that extra buffer types die on it "
            f"({cpu.reason}); models load without them, which works, but a build without AMX "
            "kernels keeps the repacked CPU kernels and needs no fallback",
            _build("cpu-noamx"),
            optional=True,
        )
    return Advice(
        f"the load probe found that extra buffer types fail on this CPU ({cpu.reason}); models "
        "load without them. No build is known to fix this: please report it",
        None,
    )


def _onnx_cuda(facts: Facts) -> Advice | None:
    if not (facts.nvidia_gpus and facts.onnx_genai == ONNX_GENAI_CPU and facts.onnx_cuda is False):
        return None
    # The two distributions share one module name: the CPU one must go before the CUDA one.
    python = shlex.quote(facts.python)
    pin = f"=={facts.onnx_genai_version}" if facts.onnx_genai_version else ""
    return Advice(
        "an NVIDIA GPU is present, but onnxruntime-genai is the CPU build: ONNX models run on "
        "the CPU",
        f"{python} -m pip uninstall -y {ONNX_GENAI_CPU} && "
        f"{python} -m pip install {ONNX_GENAI_CUDA}{pin}",
    )


def recommend(facts: Facts) -> list[Advice]:
    """What is wrong, most useful first; [] when nothing is."""
    found = (rule(facts) for rule in (_broken_build, _gpu_build, _cpu_verdict, _onnx_cuda))
    return [advice for advice in found if advice is not None]


# -- gathering -------------------------------------------------------------------------------------
def _unknown(exc: BaseException) -> str:
    return f"unknown ({type(exc).__name__}: {exc})"


def _attempt(call: Callable[[], Any], module: str | None = None) -> tuple[Any, str | None]:
    """(value, None), or (None, what to show instead)."""
    try:
        return call(), None
    except hardware.ToolMissing:
        return None, NOT_FOUND
    except ModuleNotFoundError as exc:
        if module and exc.name == module:
            return None, NOT_INSTALLED
        return None, _unknown(exc)
    except Exception as exc:
        return None, _unknown(exc)


def _distribution(*names: str) -> str | None:
    for name in names:
        try:
            metadata.version(name)
            return name
        except metadata.PackageNotFoundError:
            continue
    return None


def _gpus_shown(gpus: list[hardware.Gpu] | None, error: str | None) -> Any:
    if gpus is None:
        return error
    return [{k: v for k, v in asdict(g).items() if v and k != "tool"} for g in gpus]


def _llama_shown(llama: Mapping[str, Any]) -> dict[str, Any]:
    errors = llama.get("errors") or {}
    return {
        part: llama.get(part) if part not in errors else f"unknown ({errors[part]})"
        for part in build_info.PARTS
    }


def _build_key(
    cpu: hardware.Cpu | None, cpu_error: str | None, llama: Mapping[str, Any]
) -> tuple[str | None, str | None]:
    """(key, None), or (None, why there is none): the key needs the CPU and the build's info."""
    errors = llama.get("errors") or {}
    if cpu is None:
        return None, f"the CPU is {cpu_error}"
    for part in ("version", "system_info"):
        if part in errors:
            return None, f"the llama.cpp {part} is unknown: {errors[part]}"
    try:
        return verdicts.build_key(llama["version"], llama["system_info"], cpu), None
    except Exception as exc:
        return None, f"{type(exc).__name__}: {exc}"


def _probe_shown(
    key: str | None, key_error: str | None
) -> tuple[dict[str, Any], dict[str, Verdict]]:
    """The probe section, and this build's verdicts for recommend()."""
    path, error = _attempt(verdicts.cache_path)
    shown: dict[str, Any] = {
        "file": str(path) if path else error,
        "key": key or f"unknown ({key_error})",
    }
    if path is None or key is None:
        why = "no cache file" if path is None else f"no build key: {key_error}"
        shown["verdicts"] = f"unknown ({why})"
        return shown, {}
    builds = verdicts.read_all(path)
    found = builds.get(key, {})
    shown["verdicts"] = {d: v.to_json() for d, v in found.items()} or NOT_PROBED
    shown["other_builds"] = len([k for k in builds if k != key])
    return shown, found


def gather() -> dict[str, Any]:
    cpu, cpu_error = _attempt(hardware.read_cpu)
    nvidia, nvidia_error = _attempt(hardware.nvidia_gpus)
    amd, amd_error = _attempt(hardware.rocm_gpus)
    vulkan, vulkan_error = _attempt(hardware.vulkan_gpus)
    genai, genai_error = _attempt(hardware.onnx_genai_providers, "onnxruntime_genai")
    ort, ort_error = _attempt(hardware.onnxruntime_providers, "onnxruntime")
    llama, llama_error = _attempt(build_info.query)
    llama = llama if isinstance(llama, dict) else build_info.failed(str(llama_error))
    key, key_error = _build_key(cpu, cpu_error, llama)
    probe, found = _probe_shown(key, key_error)

    info, offload = llama.get("system_info"), llama.get("gpu_offload")
    cuda = genai[1].get("cuda") if genai else None
    facts = Facts(
        system=platform.system(),
        machine=platform.machine(),
        cpu_flags=cpu.flags if cpu else frozenset(),
        verdicts=found,
        gpu_offload=offload if isinstance(offload, bool) else None,
        llama_broken=(llama.get("errors") or {}).get("system_info"),
        amx_kernels=build_info.compiled_features(info).get("AMX_INT8") == "1"
        if isinstance(info, str)
        else None,
        nvidia_gpus=len(nvidia or []),
        amd_gpus=len(amd or []),
        vulkan_gpus=len([g for g in vulkan or [] if g.is_gpu]),
        onnx_genai=_distribution(ONNX_GENAI_CUDA, ONNX_GENAI_CPU, "onnxruntime-genai-directml"),
        onnx_genai_version=genai[0] if genai else None,
        onnx_cuda=cuda if isinstance(cuda, bool) else None,
    )
    return {
        "hardware": {
            "cpu": {"model": cpu.model, "source": cpu.source, "features": cpu.features()}
            if cpu
            else cpu_error,
            "gpus": {
                "nvidia-smi": _gpus_shown(nvidia, nvidia_error),
                "rocm-smi": _gpus_shown(amd, amd_error),
                "vulkaninfo": _gpus_shown(vulkan, vulkan_error),
            },
            "onnxruntime_genai": {"version": genai[0], "providers": genai[1]}
            if genai
            else genai_error,
            "onnxruntime": {"version": ort[0], "providers": ort[1]} if ort else ort_error,
        },
        "llama_cpp": _llama_shown(llama),
        "probe": probe,
        "advice": [asdict(a) for a in recommend(facts)],
    }
