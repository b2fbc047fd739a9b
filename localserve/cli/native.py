"""`localserve native build BACKEND`: reinstall llama-cpp-python from source with one backend's
CMake flags (the recipes of `localserve_native`).

It runs in this process's Python environment, not through the daemon: the library rebuilt is the
one a daemon started from this environment loads, and no daemon need be running to build it.
"""

from __future__ import annotations

import argparse
import shlex
from pathlib import Path

from localserve.cli import output
from localserve.cli.common import Failure
from localserve.cli.output import FAILED, OK
from localserve_native import recipes


def add_parsers(sub: argparse._SubParsersAction) -> None:
    known = recipes.recipes()
    native = sub.add_parser(
        "native",
        help="rebuild llama.cpp for this machine: CUDA, Vulkan, ROCm, Metal, no AMX",
        description="Rebuild llama-cpp-python from source for this machine's hardware.",
    )
    commands = native.add_subparsers(dest="native_command", required=True, metavar="COMMAND")
    lines = "\n".join(f"  {name:<10} {r.summary}; needs {r.needs}" for name, r in known.items())
    build = commands.add_parser(
        "build",
        help="reinstall llama-cpp-python built for BACKEND",
        description="Reinstall llama-cpp-python from source with the CMake flags of BACKEND, "
        "bypassing pip's wheel cache, in this Python environment. It takes several minutes "
        "once; the wheel is kept in the user cache folder under a key of its inputs. "
        f"`localserve doctor` says which backend this machine wants.\n\nbackends:\n{lines}",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    build.add_argument("backend", metavar="BACKEND", choices=list(known))
    build.add_argument("--dry-run", action="store_true", help="print the commands; run nothing")
    build.add_argument(
        "--wheel-only",
        action="store_true",
        help="build the wheel (or find it built) and print its path; install nothing",
    )
    build.set_defaults(handler=build_command)


def run_build(plan: recipes.Plan) -> Path:
    """The plan's wheel: built now, or kept from an earlier build of the same inputs."""
    from localserve_native import wheels

    try:
        wheel, built = wheels.build(plan)
    except wheels.BuildFailed as exc:
        raise Failure(str(exc), FAILED) from None
    if not built:
        output.note(f"using the wheel built before for these flags: {wheel}")
    return wheel


def run_install(plan: recipes.Plan, wheel: Path) -> None:
    from localserve_native import wheels

    try:
        wheels.install(plan, wheel)
    except wheels.BuildFailed as exc:
        raise Failure(str(exc), FAILED) from None


def build_command(args: argparse.Namespace) -> int:
    recipe = recipes.recipes()[args.backend]
    plan = recipes.plan(recipe)
    for step in _steps(plan):
        print(step, flush=True)
    lacks = recipes.missing(recipe)
    refusal = f"cannot build {recipe.name}: {'; '.join(lacks)} (it needs {recipe.needs})"
    if args.dry_run:
        if lacks:
            output.note(f"without --dry-run: {refusal}")
        return OK
    if lacks:
        raise Failure(refusal, FAILED)
    if recipes.cached_wheel(plan) is None:
        output.note("building llama-cpp-python from source; this takes several minutes")
    wheel = run_build(plan)
    if args.wheel_only:
        print(wheel)
        return OK
    run_install(plan, wheel)
    print(
        f"llama-cpp-python rebuilt for {recipe.name}. A running daemon keeps the old library "
        "until it restarts (`localserve shutdown`, then `localserve serve`); `localserve doctor` "
        "shows the new build."
    )
    return OK


def _steps(plan: recipes.Plan) -> list[str]:
    """The build as a person would run it, one line a step."""
    wheel = f"{plan.wheel_dir}/llama_cpp_python-*.whl"
    if not plan.recipe.guards:
        return [plan.shell_line(), shlex.join(plan.install_command(wheel))]
    edits = "; ".join(f"guard lines of {g.file} with #if {g.condition}" for g in plan.recipe.guards)
    return [
        shlex.join(plan.download_command("SRC")),
        f"# unpack SRC/llama_cpp_python-*.tar.gz; {edits}",
        plan.shell_line(plan.wheel_command("SRC/llama_cpp_python-VERSION")),
        shlex.join(plan.install_command(wheel)),
    ]
