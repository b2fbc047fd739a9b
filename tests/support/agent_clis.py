"""The real coding agents the agent faces are tested with: Claude Code, Codex, opencode, Qwen
Code and Continue's `cn`, from the npm registry at pinned versions, installed once into
`.agents/` at the repository's root; and aider, from PyPI, into a virtualenv of its own there
(`.agents/aider-venv`: its pins would fight the test suite's).

`python -m tests.support.agent_clis` installs them (.ci/run does, before the tests); `agent(name)`
gives a program's path, installing first if need be, or None where npm is missing or cannot install.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

PACKAGES = {
    "claude": "@anthropic-ai/claude-code@2.1.332",
    "codex": "@openai/codex@0.171.0",
    "opencode": "opencode-ai@1.18.33",
    "qwen": "@qwen-code/qwen-code@0.24.4",
    "cn": "@continuedev/cli@1.5.47",
}
# From PyPI, each into a virtualenv of its own: program -> its pinned package.
PIP_PACKAGES = {"aider": "aider-chat==0.86.2"}
FOLDER = Path(__file__).resolve().parents[2] / ".agents"
INSTALL_TIMEOUT_S = 600


def _venv(name: str) -> Path:
    return FOLDER / f"{name}-venv"


def _pip_installed(name: str) -> Path | None:
    package, _, version = PIP_PACKAGES[name].partition("==")
    python = _venv(name) / "bin" / "python"
    if not python.exists():
        return None
    found = subprocess.run(
        [str(python), "-c", f"import importlib.metadata as m; print(m.version({package!r}))"],
        capture_output=True,
        text=True,
    ).stdout.strip()
    program = _venv(name) / "bin" / name
    return program if found == version and program.exists() else None


def installed(name: str) -> Path | None:
    """The program, if the pinned version of its package is the one installed."""
    if name in PIP_PACKAGES:
        return _pip_installed(name)
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
    said = done.stdout + done.stderr
    for name, package in PIP_PACKAGES.items():
        if _pip_installed(name) is None:
            subprocess.run([sys.executable, "-m", "venv", str(_venv(name))], check=True)
            pip = [str(_venv(name) / "bin" / "pip"), "install", "-q", package]
            subprocess.run(pip, capture_output=True, timeout=INSTALL_TIMEOUT_S, check=True)
    return said


def agent(name: str) -> Path | None:
    if installed(name) is None:
        try:
            install()
        except (OSError, subprocess.SubprocessError):
            return None
    return installed(name)


if __name__ == "__main__":
    print(install())
    missing = [name for name in [*PACKAGES, *PIP_PACKAGES] if installed(name) is None]
    sys.exit(f"not installed: {', '.join(missing)}" if missing else 0)
