"""The chat templates real models ship, as llama.cpp keeps them for its tests
(models/templates), read from the sdist of the pinned llama-cpp-python: downloaded once with
pip (PyPI's copy, usually already in pip's cache from the install) and kept in the user's cache
folder, never copied into this repository."""

from __future__ import annotations

import os
import subprocess
import sys
import tarfile
import tempfile
from functools import cache
from pathlib import Path

VERSION = "0.3.36"  # pyproject.toml's pin
_INSIDE = "vendor/llama.cpp/models/templates/"

# The families the project is asked to serve, by the template file that stands for each.
FAMILIES = {
    "qwen3-coder": "Qwen3-Coder",
    "qwen3.5": "Qwen3.5-4B",
    "gpt-oss": "openai-gpt-oss-120b",
    "glm-4.6": "GLM-4.6",
    "deepseek-v3.1": "deepseek-ai-DeepSeek-V3.1",
    "kimi-k2": "moonshotai-Kimi-K2",
    "minimax-m2": "MiniMax-M2",
    "devstral": "unsloth-mistral-Devstral-Small-2507",
    "llama3.1": "meta-llama-Llama-3.1-8B-Instruct",
    "granite-4.0": "ibm-granite-granite-4.0",
    "gemma-4": "google-gemma-4-31B-it",
}


def _folder() -> Path:
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "localserve-tests" / f"llama-cpp-python-{VERSION}-templates"


@cache
def corpus() -> dict[str, str]:
    """Every template of the corpus, by its file name without `.jinja`."""
    folder = _folder()
    if not folder.is_dir():
        _fetch(folder)
    return {p.stem: p.read_text(encoding="utf-8") for p in sorted(folder.glob("*.jinja"))}


def template(name: str) -> str:
    """A template by its file name or by the family name of FAMILIES."""
    return corpus()[FAMILIES.get(name, name)]


def _fetch(folder: Path) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "download",
                "-q",
                "--no-deps",
                "--no-binary",
                ":all:",
                f"llama-cpp-python=={VERSION}",
                "-d",
                tmp,
            ],
            check=True,
        )
        (sdist,) = Path(tmp).glob("*.tar.gz")
        staging = folder.with_name(folder.name + ".part")
        staging.mkdir(parents=True, exist_ok=True)
        with tarfile.open(sdist) as tar:
            for member in tar.getmembers():
                at = member.name.find(_INSIDE)
                if at >= 0 and member.name.endswith(".jinja") and member.isfile():
                    source = tar.extractfile(member)
                    assert source is not None
                    (staging / member.name[at + len(_INSIDE) :]).write_bytes(source.read())
        staging.rename(folder)
