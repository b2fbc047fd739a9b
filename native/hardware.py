"""What this machine offers llama.cpp and onnxruntime-genai: the CPU's model and instruction-set
flags, the GPUs the vendors' tools list, and onnxruntime's execution providers.

Each tool is asked with a short timeout. A tool that is not installed raises `ToolMissing`, which
a report shows as "not found": most machines lack most of these tools, and that is no error.
"""

from __future__ import annotations

import platform
import re
import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

TOOL_TIMEOUT_S = 5.0

# The flags that decide which ggml CPU kernels can run, spelled as /proc/cpuinfo spells them.
FEATURES = (
    "avx",
    "avx2",
    "fma",
    "f16c",
    "avx512f",
    "avx512bw",
    "avx512vl",
    "avx512_vnni",
    "amx_tile",
    "amx_int8",
    "amx_bf16",
)
AMX = ("amx_tile", "amx_int8", "amx_bf16")
# Their counterparts on ARM (dot products, SVE, int8 matrix multiply), for ARM machines.
ARM_FEATURES = ("asimd", "asimddp", "sve", "sve2", "i8mm", "bf16")
X86 = ("x86_64", "amd64", "i386", "i686", "x86")

# macOS's sysctl spells some flags otherwise (Intel Macs; Apple silicon lists none of these).
_SYSCTL_SPELLING = {"avx1.0": "avx", "avx512vnni": "avx512_vnni", "avx512bf16": "avx512_bf16"}


class ToolMissing(Exception):
    """The tool is not on PATH (or the platform has no such source)."""


@dataclass(frozen=True)
class Cpu:
    model: str
    flags: frozenset[str]
    source: str  # where the flags came from: /proc/cpuinfo, sysctl, or nothing
    machine: str = "x86_64"  # platform.machine(), lower case

    @property
    def has_amx(self) -> bool:
        return any(flag in self.flags for flag in AMX)

    def features(self) -> dict[str, bool]:
        """The flags that matter to ggml's kernels on this architecture, present or not."""
        wanted = FEATURES if self.machine in X86 else ARM_FEATURES
        return {flag: flag in self.flags for flag in wanted}


@dataclass(frozen=True)
class Gpu:
    tool: str  # the tool that listed it: nvidia-smi, rocm-smi, vulkaninfo
    name: str
    memory: str = ""
    driver: str = ""
    kind: str = ""  # Vulkan's device type: discrete_gpu, integrated_gpu, cpu (llvmpipe), ...
    vendor_id: str = ""

    @property
    def is_gpu(self) -> bool:
        """Vulkan also lists software renderers (llvmpipe) as devices: those are no GPU."""
        return self.kind not in ("cpu", "other")


def tool_output(args: Sequence[str], timeout: float = TOOL_TIMEOUT_S) -> str:
    """What the tool prints. ToolMissing when it is not on PATH; RuntimeError when it fails."""
    if shutil.which(args[0]) is None:
        raise ToolMissing(f"{args[0]} not found")
    try:
        done = subprocess.run(
            list(args), capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL
        )
    except subprocess.TimeoutExpired:
        raise RuntimeError(f"{args[0]} gave no answer within {timeout:.0f} s") from None
    # vulkaninfo exits non-zero over a single broken driver yet still lists the rest.
    if done.returncode != 0 and not done.stdout.strip():
        last = (done.stderr.strip().splitlines() or [""])[-1]
        raise RuntimeError(f"{args[0]} exited with {done.returncode}: {last}".rstrip(": "))
    return done.stdout


# -- the CPU ---------------------------------------------------------------------------------------
def parse_cpuinfo(text: str, machine: str | None = None) -> Cpu:
    """The first value of each field: every core of one host reports the same flags, and on ARM
    the model ("Hardware", "Model") comes after the per-core blocks."""
    fields: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep:
            fields.setdefault(key.strip().lower(), value.strip())
    names = ("model name", "model", "hardware", "cpu model")
    model = next((fields[n] for n in names if fields.get(n)), platform.machine())
    flags = fields.get("flags") or fields.get("features") or ""
    flags_set = frozenset(flags.lower().split())
    return Cpu(model, flags_set, "/proc/cpuinfo", (machine or platform.machine()).lower())


def parse_sysctl(brand: str, feature_lists: Sequence[str]) -> Cpu:
    flags = set()
    for text in feature_lists:
        for word in text.lower().split():
            flags.add(_SYSCTL_SPELLING.get(word, word))
    machine = platform.machine().lower()
    return Cpu(brand.strip() or machine, frozenset(flags), "sysctl", machine)


def read_cpu() -> Cpu:
    system = platform.system()
    if system == "Linux":
        return parse_cpuinfo(Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace"))
    if system == "Darwin":
        brand = tool_output(["sysctl", "-n", "machdep.cpu.brand_string"])
        lists = []
        # Intel Macs only: Apple silicon has no such keys, and sysctl fails on each.
        for key in ("machdep.cpu.features", "machdep.cpu.leaf7_features"):
            try:
                lists.append(tool_output(["sysctl", "-n", key]))
            except RuntimeError:
                pass
        return parse_sysctl(brand, lists)
    machine = platform.machine().lower()
    return Cpu(platform.processor() or machine, frozenset(), "none", machine)


# -- GPUs ------------------------------------------------------------------------------------------
def parse_nvidia_smi(text: str) -> list[Gpu]:
    """`nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader`."""
    gpus = []
    for line in text.splitlines():
        cells = [cell.strip() for cell in line.split(",")]
        if cells and cells[0]:
            cells += [""] * (3 - len(cells))
            name, memory, driver = cells[:3]
            gpus.append(Gpu("nvidia-smi", name, memory, driver, vendor_id="0x10de"))
    return gpus


def nvidia_gpus() -> list[Gpu]:
    query = "--query-gpu=name,memory.total,driver_version"
    return parse_nvidia_smi(tool_output(["nvidia-smi", query, "--format=csv,noheader"]))


_ROCM_LINE = re.compile(r"^GPU\[(\d+)\]\s*:\s*Card (series|model|vendor|SKU)\s*:\s*(.*)$", re.I)


def parse_rocm_smi(text: str) -> list[Gpu]:
    """`rocm-smi --showproductname`: `GPU[0] : Card series: Navi 21 ...` lines, a few per GPU."""
    cards: dict[str, dict[str, str]] = {}
    for line in text.splitlines():
        match = _ROCM_LINE.match(line.strip())
        if match:
            cards.setdefault(match[1], {})[match[2].lower()] = match[3].strip()
    gpus = []
    for index, card in cards.items():
        name = card.get("series") or card.get("model") or f"GPU {index}"
        gpus.append(Gpu("rocm-smi", name, vendor_id="0x1002"))
    return gpus


def rocm_gpus() -> list[Gpu]:
    return parse_rocm_smi(tool_output(["rocm-smi", "--showproductname"]))


def parse_vulkaninfo(text: str) -> list[Gpu]:
    """`vulkaninfo --summary`: after `Devices:`, a `GPUn:` block of `key = value` lines each."""
    devices: list[dict[str, str]] = []
    in_devices = False
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith("Devices:"):
            in_devices = True
        elif in_devices and re.fullmatch(r"GPU\d+:", stripped):
            devices.append({})
        elif in_devices and devices and "=" in stripped:
            key, _, value = stripped.partition("=")
            devices[-1][key.strip()] = value.strip()
    return [
        Gpu(
            "vulkaninfo",
            d.get("deviceName", "?"),
            driver=" ".join(filter(None, (d.get("driverName"), d.get("driverInfo")))),
            kind=d.get("deviceType", "").removeprefix("PHYSICAL_DEVICE_TYPE_").lower(),
            vendor_id=d.get("vendorID", "").lower(),
        )
        for d in devices
    ]


def vulkan_gpus() -> list[Gpu]:
    return parse_vulkaninfo(tool_output(["vulkaninfo", "--summary"], timeout=10.0))


# -- onnxruntime ----------------------------------------------------------------------------------
def onnx_genai_providers() -> tuple[str, dict[str, bool | str]]:
    """onnxruntime-genai's version and each `is_*_available()` it has (their set grows with
    versions, so they are found by name). ModuleNotFoundError when it is not installed."""
    import onnxruntime_genai as og

    providers: dict[str, bool | str] = {}
    for name in sorted(dir(og)):
        if name.startswith("is_") and name.endswith("_available"):
            try:
                providers[name[3 : -len("_available")]] = bool(getattr(og, name)())
            except Exception as exc:  # one provider's check failing says nothing of the others
                providers[name[3 : -len("_available")]] = f"unknown ({exc})"
    return str(getattr(og, "__version__", "?")), providers


def onnxruntime_providers() -> tuple[str, list[str]]:
    import onnxruntime

    return str(onnxruntime.__version__), list(onnxruntime.get_available_providers())
