"""What a CUDA build needs to be told about this machine's toolkit, beyond `-DGGML_CUDA=ON`.

- cuBLAS: ggml-cuda links it. A toolkit installed without it (a slim container's, this
  project's build machines') can take the one in PyPI's `nvidia-cublas` wheel: the build is
  pointed at its library and headers.
- The driver: ggml-cuda links libcuda for its virtual-memory pool. A machine with the toolkit
  and no driver (a build machine) builds without that pool (GGML_CUDA_NO_VMM), which is what
  such a build can link; a machine with a GPU has the driver and keeps it.
"""

from __future__ import annotations

import ctypes.util
import importlib.util
import shutil
from pathlib import Path


def toolkit_dir() -> Path | None:
    nvcc = shutil.which("nvcc")  # looked up at the call: tests replace shutil.which
    return Path(nvcc).resolve().parent.parent if nvcc else None


def _has(folder: Path, stem: str) -> bool:
    return any(folder.glob(f"{stem}.so*")) or any(folder.glob(f"{stem}*.lib"))


def pip_cublas() -> Path | None:
    """The folder of `nvidia-cublas`'s lib/ and include/, if that wheel is installed."""
    spec = importlib.util.find_spec("nvidia")
    for root in (spec.submodule_search_locations or []) if spec else []:
        for folder in sorted(Path(root).iterdir()):
            if _has(folder / "lib", "libcublas") and (folder / "include" / "cublas_v2.h").exists():
                return folder
    return None


def _libs(toolkit: Path) -> list[Path]:
    return [toolkit / "lib64", toolkit / "lib", toolkit / "lib" / "x64"]


def cmake_flags(toolkit: Path | None = None) -> list[str]:
    """Flags for what this machine's toolkit lacks; [] for a complete toolkit with a driver."""
    toolkit = toolkit or toolkit_dir()
    if toolkit is None:
        return []
    libs = _libs(toolkit)
    flags = []
    if not any(_has(lib, "libcublas") for lib in libs):
        cublas = pip_cublas()
        if cublas is not None:
            lib, include = cublas / "lib", cublas / "include"
            flags += [
                f"-DCUDA_cublas_LIBRARY={min(lib.glob('libcublas.so*'))}",
                f"-DCUDA_cublasLt_LIBRARY={min(lib.glob('libcublasLt.so*'))}",
                f"-DCMAKE_CUDA_FLAGS=-I{include}",
                f"-DCMAKE_CXX_FLAGS=-I{include}",
            ]
    driver = ctypes.util.find_library("cuda") or any(_has(lib / "stubs", "libcuda") for lib in libs)
    if not driver:
        flags.append("-DGGML_CUDA_NO_VMM=ON")
    return flags


def lacks(toolkit: Path | None = None) -> list[str]:
    """What stops a CUDA build here beyond nvcc: cuBLAS, in the toolkit or from PyPI."""
    toolkit = toolkit or toolkit_dir()
    if toolkit is None or any(_has(lib, "libcublas") for lib in _libs(toolkit)):
        return []
    if pip_cublas() is not None:
        return []
    return [
        "cuBLAS is neither in the CUDA toolkit nor installed from PyPI (pip install nvidia-cublas)"
    ]
