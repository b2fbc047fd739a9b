"""Build recipes: llama-cpp-python reinstalled from source with the CMake flags of one backend.

The recipes are data (`recipes.toml` beside this file); this module turns one into the command
`localserve native build BACKEND` runs, and says what the machine lacks for it. pip's wheel
cache is keyed by the package's name and version, not by CMAKE_ARGS, so a rebuild with other
flags would quietly reinstall the cached wheel: the command bypasses the cache and reinstalls.
"""

from __future__ import annotations

import os
import platform
import shlex
import shutil
import sys
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from importlib import resources

from localserve.native import hardware

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

# The pin of pyproject.toml's dependencies (tests/test_native_build.py checks they agree).
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
class Recipe:
    name: str
    summary: str
    needs: str
    cmake: tuple[str, ...]
    cpu_flags: tuple[FlagRule, ...] = ()
    commands: tuple[str, ...] = ()
    system: str | None = None
    machines: tuple[str, ...] = ()


@dataclass(frozen=True)
class Plan:
    """One build, ready to run: the command and the environment variables it adds."""

    recipe: Recipe
    command: tuple[str, ...]
    env: Mapping[str, str]

    def shell_line(self) -> str:
        """The build as a person would type it. CMAKE_ARGS is quoted even when it needs no
        quotes, so a person adding a flag to it keeps the quotes."""
        assigns = [
            f"{name}={_single_quoted(value) if name == 'CMAKE_ARGS' else shlex.quote(value)}"
            for name, value in self.env.items()
        ]
        return " ".join([*assigns, shlex.join(self.command)])


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
    return Recipe(
        name=name,
        summary=str(raw.get("summary", "")),
        needs=str(raw.get("needs", "")),
        cmake=strings("cmake"),
        cpu_flags=tuple(FlagRule(strings("when", r), strings("cmake", r)) for r in rules),
        commands=strings("commands"),
        system=str(system) if system is not None else None,
        machines=tuple(m.lower() for m in strings("machines")),
    )


def recipes() -> dict[str, Recipe]:
    """The shipped recipes, by backend name, in the file's order."""
    text = resources.files("localserve.native").joinpath("recipes.toml").read_text("utf-8")
    return {name: _recipe(name, raw) for name, raw in tomllib.loads(text).items()}


def cmake_args(recipe: Recipe, cpu_flags: Iterable[str]) -> list[str]:
    flags = set(cpu_flags)
    args = list(recipe.cmake)
    for rule in recipe.cpu_flags:
        if all(flag in flags for flag in rule.when):
            args += rule.cmake
    return args


def pip_command(python: str | None = None) -> list[str]:
    # --no-cache-dir: the cached wheel was built with other flags; --force-reinstall: the same
    # version is installed already, so pip would otherwise do nothing; --no-deps: only the
    # library changes, not numpy or the rest of the environment.
    return [
        python or sys.executable, "-m", "pip", "install",
        "--no-cache-dir", "--force-reinstall", "--no-deps", PACKAGE,
    ]  # fmt: skip


def this_cpu_flags() -> frozenset[str]:
    """This machine's CPU flags; none when they cannot be read, which leaves the optional
    AVX-512 flags of cpu-noamx off: slower kernels, never ones the CPU cannot run."""
    try:
        return hardware.read_cpu().flags
    except Exception:
        return frozenset()


def plan(
    recipe: Recipe, cpu_flags: Iterable[str] | None = None, python: str | None = None
) -> Plan:
    """The build of `recipe` for a CPU with `cpu_flags` (default: this machine's)."""
    if cpu_flags is None:
        cpu_flags = this_cpu_flags()
    env = {
        "CMAKE_ARGS": " ".join(cmake_args(recipe, cpu_flags)),
        "FORCE_CMAKE": "1",
        # A pip configured with an extra index of prebuilt llama-cpp-python wheels (CUDA,
        # Metal) would install one of those and ignore CMAKE_ARGS: always build from source.
        "PIP_NO_BINARY": DISTRIBUTION,
    }
    return Plan(recipe, tuple(pip_command(python)), env)


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
    # Windows finds MSVC through the build tools, not PATH; CXX names a compiler explicitly.
    if system != "Windows" and not env.get("CXX") and all(which(c) is None for c in COMPILERS):
        lacks.append(f"no C++ compiler is on PATH ({', '.join(COMPILERS)})")
    return lacks
