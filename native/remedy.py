"""The probe's remedy where llama.cpp's AMX kernels die: a build of llama.cpp without AMX
(the `cpu-noamx` recipe), made once, kept under its key, and unpacked beside its wheel, so that
a worker runs it from there (first on its PYTHONPATH) with the extra buffer types on.

The venv is left as it is: the daemon keeps working from it while the build runs, and a
remedy that turns out not to help is only a folder in the cache. The folder is unpacked into a
temporary name and renamed when whole, as the wheel is, so a cut-off unpack never passes for a
finished one.
"""

from __future__ import annotations

import os
import tempfile
import zipfile
from pathlib import Path

try:
    import fcntl
except ImportError:  # Windows: no build of this recipe there, and no lock needed
    fcntl = None  # type: ignore[assignment]

from localserve_native import recipes, wheels

RECIPE = "cpu-noamx"


def plan() -> recipes.Plan:
    """The remedy's build for this CPU."""
    return recipes.plan(recipes.recipes()[RECIPE])


def site(build: recipes.Plan) -> Path:
    """Where the build is unpacked: the folder a worker puts first on its PYTHONPATH."""
    return build.wheel_dir / "site"


def ready(build: recipes.Plan) -> Path | None:
    """The unpacked build, if it was made before."""
    folder = site(build)
    return folder if (folder / "llama_cpp").is_dir() else None


def prepare(build: recipes.Plan, run: wheels.Runner | None = None) -> Path:
    """The unpacked build: kept from before, or built (minutes) and unpacked now. Raises
    BuildFailed, with the step that failed, when it cannot be made."""
    build.wheel_dir.parent.mkdir(parents=True, exist_ok=True)
    with open(build.wheel_dir.with_name(build.wheel_dir.name + ".lock"), "w") as lock:
        if fcntl is not None:  # a second daemon waits for the first's build, then takes it
            fcntl.flock(lock, fcntl.LOCK_EX)
        return ready(build) or _made(build, run)


def _made(build: recipes.Plan, run: wheels.Runner | None) -> Path:
    lacks = recipes.missing(build.recipe)
    if lacks:
        raise wheels.BuildFailed(f"{RECIPE} cannot be built here: {'; '.join(lacks)}")
    wheel, _ = wheels.build(build, run) if run is not None else wheels.build(build)
    unpacking = Path(tempfile.mkdtemp(dir=build.wheel_dir, prefix=".site-"))
    with zipfile.ZipFile(wheel) as archive:
        archive.extractall(unpacking)
    if not (unpacking / "llama_cpp").is_dir():
        raise wheels.BuildFailed(f"{wheel.name} holds no llama_cpp package")
    os.replace(unpacking, site(build))
    return site(build)


def python_path(folder: Path | str, inherited: str | None) -> str:
    """PYTHONPATH with `folder` first, so that its llama_cpp shadows the venv's."""
    return os.pathsep.join([str(folder), *([inherited] if inherited else [])])
