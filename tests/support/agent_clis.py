"""The real coding agents the agent faces are tested with: Claude Code and Codex, from the npm
registry at pinned versions, installed once into `.agents/` at the repository's root.

`python -m tests.support.agent_clis` installs them (.ci/run does, before the tests); `agent(name)`
gives a program's path, installing first if need be, or None where npm is missing or cannot install.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

PACKAGES = {"claude": "@anthropic-ai/claude-code@2.1.332", "codex": "@openai/codex@0.171.0"}
FOLDER = Path(__file__).resolve().parents[2] / ".agents"
INSTALL_TIMEOUT_S = 600


def installed(name: str) -> Path | None:
    """The program, if the pinned version of its package is the one installed."""
    package, _, version = PACKAGES[name].rpartition("@")
    try:
        found = json.loads((FOLDER / "node_modules" / package / "package.json").read_text())
    except (OSError, ValueError):
        return None
    program = FOLDER / "node_modules" / ".bin" / name
    return program if found.get("version") == version and program.exists() else None


def install() -> str:
    """npm's output; raises CalledProcessError when it fails."""
    npm = shutil.which("npm")
    if npm is None:
        raise FileNotFoundError("npm is not installed")
    FOLDER.mkdir(exist_ok=True)
    done = subprocess.run(
        [
            npm,
            "install",
            "--prefix",
            str(FOLDER),
            "--no-audit",
            "--no-fund",
            "--no-save",
            *PACKAGES.values(),
        ],
        capture_output=True,
        text=True,
        timeout=INSTALL_TIMEOUT_S,
        check=True,
    )
    return done.stdout + done.stderr


def agent(name: str) -> Path | None:
    if installed(name) is None:
        try:
            install()
        except (OSError, subprocess.SubprocessError):
            return None
    return installed(name)


if __name__ == "__main__":
    print(install())
    missing = [name for name in PACKAGES if installed(name) is None]
    sys.exit(f"not installed: {', '.join(missing)}" if missing else 0)
