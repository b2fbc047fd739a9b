"""`localserve native build BACKEND`: reinstall llama-cpp-python from source with one backend's
CMake flags (the recipes of `localserve.native`).

It runs in this process's Python environment, not through the daemon: the library rebuilt is the
one a daemon started from this environment loads, and no daemon need be running to build it.
"""

from __future__ import annotations

import argparse
import os
import subprocess

from localserve.cli import output
from localserve.cli.common import Failure
from localserve.cli.output import FAILED, OK
from localserve.native import recipes


def add_parsers(sub: argparse._SubParsersAction) -> None:
    known = recipes.recipes()
    native = sub.add_parser(
        "native", help="rebuild llama.cpp for this machine: CUDA, Vulkan, ROCm, Metal, no AMX",
        description="Rebuild llama-cpp-python from source for this machine's hardware.",
    )  # fmt: skip
    commands = native.add_subparsers(dest="native_command", required=True, metavar="COMMAND")
    lines = "\n".join(f"  {name:<10} {r.summary}; needs {r.needs}" for name, r in known.items())
    build = commands.add_parser(
        "build", help="reinstall llama-cpp-python built for BACKEND",
        description="Reinstall llama-cpp-python from source with the CMake flags of BACKEND, "
        "bypassing pip's wheel cache, in this Python environment. It takes several minutes. "
        f"`localserve doctor` says which backend this machine wants.\n\nbackends:\n{lines}",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )  # fmt: skip
    build.add_argument("backend", metavar="BACKEND", choices=list(known))
    build.add_argument("--dry-run", action="store_true", help="print the command; run nothing")
    build.set_defaults(handler=build_command)


def run_build(plan: recipes.Plan) -> int:
    """pip's exit code. Its output streams straight to the terminal: a build of several minutes
    shows that it is alive, and a failure shows the compiler's own words."""
    return subprocess.run(list(plan.command), env={**os.environ, **plan.env}).returncode


def build_command(args: argparse.Namespace) -> int:
    recipe = recipes.recipes()[args.backend]
    plan = recipes.plan(recipe)
    print(plan.shell_line(), flush=True)
    lacks = recipes.missing(recipe)
    refusal = f"cannot build {recipe.name}: {'; '.join(lacks)} (it needs {recipe.needs})"
    if args.dry_run:
        if lacks:
            output.note(f"without --dry-run: {refusal}")
        return OK
    if lacks:
        raise Failure(refusal, FAILED)
    output.note("building llama-cpp-python from source; this takes several minutes")
    code = run_build(plan)
    if code != 0:
        raise Failure(f"the build failed: pip exited with {code} (its output is above)", FAILED)
    print(
        f"llama-cpp-python rebuilt for {recipe.name}. A running daemon keeps the old library "
        "until it restarts (`localserve shutdown`, then `localserve serve`); `localserve doctor` "
        "shows the new build."
    )
    return OK
