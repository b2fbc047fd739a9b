"""Build recipes: llama-cpp-python reinstalled from source with the CMake flags of one backend.

The recipes are data (`recipes.toml` beside this file); this module turns one into the plan
`localserve native build BACKEND` runs (native/wheels.py runs it), and says what the machine
lacks for it. pip's wheel cache is keyed by the package's name and version, not by CMAKE_ARGS,
so a rebuild with other flags would quietly reinstall the cached wheel: the build bypasses pip's
cache and keeps its own, keyed by every input of the build.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import shlex
import shutil
import sys
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass
from importlib import resources
from pathlib import Path

from localserve_native import cuda_toolkit, hardware

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

# The pin of pyproject.toml's dependencies (tests/unit/native/test_native_build.py checks both).
PACKAGE = "llama-cpp-python==0.3.36"
DISTRIBUTION = "llama-cpp-python"
# Any one of them will do: the build fails late and obscurely without a C++ compiler.
COMPILERS = ("c++", "g++", "clang++")
_SYSTEM_NAMES = {"Darwin": "macOS"}


@dataclass(frozen=True)
class FlagRule:
    when: tuple[str, ...]  # CPU flags that must all be present
    cmake: tuple[str, ...]


@dataclass(frozen=True)
class Guard:
    """Source lines `first`..`last` of `file` compiled only `if` a condition holds."""

    file: str
    condition: str
    first: str
    last: str
    otherwise: str


@dataclass(frozen=True)
class Recipe:
    name: str
    summary: str
    needs: str
    cmake: tuple[str, ...]
    cpu_flags: tuple[FlagRule, ...] = ()
    commands: tuple[str, ...] = ()
    system: str | None = None
    machines: tuple[str, ...] = ()
    guards: tuple[Guard, ...] = ()
    env: tuple[str, ...] = ()  # environment variables handed to the build when set


@dataclass(frozen=True)
class Plan:
    """One build, ready to run: where its wheel is kept, the environment the build adds, and
    the commands (`source` is the sdist folder when the recipe edits sources)."""

    recipe: Recipe
    env: Mapping[str, str]
    key: str  # of every input: a wheel under this key is this build
    wheel_dir: Path
    python: str

    def wheel_command(self, source: str = PACKAGE) -> tuple[str, ...]:
        # --no-cache-dir: pip's cached wheel of this version was built with other flags.
        return (
            self.python,
            "-m",
            "pip",
            "wheel",
            "--no-cache-dir",
            "--no-deps",
            "-w",
            str(self.wheel_dir),
            source,
        )

    def install_command(self, wheel: str) -> tuple[str, ...]:
        # --force-reinstall: the same version is installed already, so pip would otherwise do
        # nothing; --no-deps: only the library changes, not numpy or the rest.
        return (self.python, "-m", "pip", "install", "--force-reinstall", "--no-deps", wheel)

    def download_command(self, folder: str) -> tuple[str, ...]:
        return (
            self.python,
            "-m",
            "pip",
            "download",
            "--no-deps",
            "--no-binary",
            ":all:",
            "-d",
            folder,
            PACKAGE,
        )

    def shell_line(self, command: tuple[str, ...] | None = None) -> str:
        """A command as a person would type it, with the build's environment. CMAKE_ARGS is
        quoted even when it needs no quotes, so a person adding a flag to it keeps them."""
        assigns = [
            f"{name}={_single_quoted(value) if name == 'CMAKE_ARGS' else shlex.quote(value)}"
            for name, value in self.env.items()
        ]
        return " ".join([*assigns, shlex.join(command or self.wheel_command())])


def _single_quoted(text: str) -> str:
    return "'" + text.replace("'", "'\"'\"'") + "'"


def _recipe(name: str, raw: Mapping[str, object]) -> Recipe:
    def strings(key: str, source: Mapping[str, object] = raw) -> tuple[str, ...]:
        value = source.get(key, [])
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise ValueError(f"recipe {name}: {key} is a list of strings")
        return tuple(value)

    rules = raw.get("cpu_flags", [])
    if not isinstance(rules, list) or not all(isinstance(r, dict) for r in rules):
        raise ValueError(f"recipe {name}: cpu_flags is a list of tables")
    system = raw.get("system")
    guards = raw.get("guards", [])
    if not isinstance(guards, list) or not all(isinstance(g, dict) for g in guards):
        raise ValueError(f"recipe {name}: guards is a list of tables")
    return Recipe(
        name=name,
        summary=str(raw.get("summary", "")),
        needs=str(raw.get("needs", "")),
        cmake=strings("cmake"),
        cpu_flags=tuple(FlagRule(strings("when", r), strings("cmake", r)) for r in rules),
        commands=strings("commands"),
        system=str(system) if system is not None else None,
        machines=tuple(m.lower() for m in strings("machines")),
        guards=tuple(
            Guard(
                str(g["file"]), str(g["if"]), str(g["first"]), str(g["last"]), str(g["otherwise"])
            )
            for g in guards
        ),
        env=strings("env"),
    )


def recipes() -> dict[str, Recipe]:
    """The shipped recipes, by backend name, in the file's order."""
    text = resources.files("localserve_native").joinpath("recipes.toml").read_text("utf-8")
    return {name: _recipe(name, raw) for name, raw in tomllib.loads(text).items()}


def cmake_args(recipe: Recipe, cpu_flags: Iterable[str]) -> list[str]:
    flags = set(cpu_flags)
    args = list(recipe.cmake)
    for rule in recipe.cpu_flags:
        if all(flag in flags for flag in rule.when):
            args += rule.cmake
    return args


# Flags a backend's toolkit on this machine calls for, by recipe (native/cuda_toolkit.py).
_MACHINE_FLAGS: dict[str, Callable[[], list[str]]] = {"cuda": cuda_toolkit.cmake_flags}
_MACHINE_LACKS: dict[str, Callable[[], list[str]]] = {"cuda": cuda_toolkit.lacks}


def this_cpu_flags() -> frozenset[str]:
    """This machine's CPU flags; none when they cannot be read, which leaves the optional
    AVX-512 flags of cpu-noamx off: slower kernels, never ones the CPU cannot run."""
    try:
        return hardware.read_cpu().flags
    except Exception:
        return frozenset()


def plan(recipe: Recipe, cpu_flags: Iterable[str] | None = None, python: str | None = None) -> Plan:
    """The build of `recipe` for a CPU with `cpu_flags` (default: this machine's)."""
    if cpu_flags is None:
        cpu_flags = this_cpu_flags()
    machine_flags = _MACHINE_FLAGS.get(recipe.name, lambda: [])()
    env = {
        "CMAKE_ARGS": " ".join([*cmake_args(recipe, cpu_flags), *machine_flags]),
        "FORCE_CMAKE": "1",
        # A pip configured with an extra index of prebuilt llama-cpp-python wheels (CUDA,
        # Metal) would install one of those and ignore CMAKE_ARGS: always build from source.
        "PIP_NO_BINARY": DISTRIBUTION,
        **{name: os.environ[name] for name in recipe.env if os.environ.get(name)},
    }
    inputs = {
        "package": PACKAGE,
        "env": env,
        "guards": [asdict(g) for g in recipe.guards],
        "python": list(sys.version_info[:2]),
        "machine": platform.machine().lower(),
        "system": platform.system(),
    }
    key = hashlib.sha256(json.dumps(inputs, sort_keys=True).encode()).hexdigest()[:16]
    folder = wheel_cache() / f"{recipe.name}-{key}"
    return Plan(recipe, env, key, folder, python or sys.executable)


def wheel_cache() -> Path:
    """Where built wheels are kept: LOCALSERVE_WHEELS, or the user cache folder's `wheels`."""
    override = os.environ.get("LOCALSERVE_WHEELS")
    if override:
        return Path(override)
    import platformdirs  # here: listing the recipes needs nothing but the standard library

    return Path(platformdirs.user_cache_dir("localserve", appauthor=False)) / "wheels"


def cached_wheel(plan: Plan) -> Path | None:
    """The wheel this plan built before, if it is kept."""
    wheels = sorted(plan.wheel_dir.glob("llama_cpp_python-*.whl"))
    return wheels[-1] if wheels else None


def missing(
    recipe: Recipe,
    which: Callable[[str], str | None] | None = None,
    system: str | None = None,
    machine: str | None = None,
    env: Mapping[str, str] | None = None,
) -> list[str]:
    """What stops the recipe building here, a sentence each naming what is missing; [] when
    nothing does."""
    which = which or shutil.which  # looked up at the call: tests replace shutil.which
    system = system if system is not None else platform.system()
    machine = (machine if machine is not None else platform.machine()).lower()
    env = env if env is not None else os.environ
    lacks = []
    if recipe.system and system != recipe.system:
        wanted = _SYSTEM_NAMES.get(recipe.system, recipe.system)
        lacks.append(f"this is {_SYSTEM_NAMES.get(system, system)}, not {wanted}")
    if recipe.machines and machine not in recipe.machines:
        lacks.append(f"this is an {machine} CPU, not {' or '.join(recipe.machines)}")
    lacks += [f"{command} is not on PATH" for command in recipe.commands if which(command) is None]
    if not lacks and recipe.commands:
        lacks += _MACHINE_LACKS.get(recipe.name, lambda: [])()
    # Windows finds MSVC through the build tools, not PATH; CXX names a compiler explicitly.
    if system != "Windows" and not env.get("CXX") and all(which(c) is None for c in COMPILERS):
        lacks.append(f"no C++ compiler is on PATH ({', '.join(COMPILERS)})")
    return lacks
