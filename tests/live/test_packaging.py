"""The catalog ships inside the built wheel, and the wheel holds every package of the tree."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import tomllib

from tests.support.helpers import REPO

ROOT = REPO


def test_every_package_folder_is_listed_in_pyproject() -> None:
    listed = set(
        tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]
    )
    on_disk = {
        ".".join(p.parent.relative_to(ROOT).parts)
        for p in (ROOT / "localserve").rglob("__init__.py")
    }
    top = {"localserve.models"} | {f"localserve_{folder}" for folder in PACKAGES_OF_THEIR_OWN}
    assert on_disk | top == listed


PACKAGES_OF_THEIR_OWN = ("native", "tray", "installer")


def test_the_design_cards_folders_are_at_the_top_of_the_tree() -> None:
    for folder in ("localserve", "native", "tray", "installer", "models", "tests", "docs"):
        assert (ROOT / folder).is_dir(), folder
    for folder in PACKAGES_OF_THEIR_OWN:
        assert not (ROOT / "localserve" / folder).exists(), folder


def test_the_built_wheel_resolves_a_catalog_name_in_a_clean_virtualenv(tmp_path: Path) -> None:
    wheels = tmp_path / "wheels"
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(wheels), str(ROOT)],
        check=True,
    )
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    python = venv / "bin" / "python"
    wheel = next(wheels.glob("localserve-*.whl"))
    # No dependencies: the catalog must come from the wheel alone, not from this checkout.
    subprocess.run([str(python), "-m", "pip", "install", "-q", "--no-deps", str(wheel)], check=True)
    out = subprocess.run(
        [
            str(python),
            "-c",
            "from localserve.store.catalog import Catalog; "
            "from localserve.store.names import parse_name; "
            "e = Catalog.load().get(parse_name('llama3.2:1b')); print(e.source, e.format)",
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        check=True,
    )
    assert out.stdout.split() == [
        "hf://bartowski/Llama-3.2-1B-Instruct-GGUF/Llama-3.2-1B-Instruct-Q4_K_M.gguf",
        "gguf",
    ]
    # The build recipes are package data too (native/recipes.toml).
    out = subprocess.run(
        [str(python), "-c", "from localserve_native.recipes import recipes; print(*recipes())"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        check=True,
    )
    assert "cpu-noamx" in out.stdout.split()
    # The tray and the login service come from their own top-level folders, in the same wheel.
    out = subprocess.run(
        [
            str(python),
            "-c",
            "from importlib.util import find_spec; from localserve_installer.units import "
            "systemd_unit; assert find_spec('localserve_tray.app'); "
            "print(systemd_unit(['localserve', 'serve']).splitlines()[6])",
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        check=True,
    )
    assert out.stdout.strip() == "ExecStart=localserve serve"


def test_the_wheel_ships_the_web_page_and_the_tray_program(tmp_path: Path) -> None:
    import zipfile

    wheels = tmp_path / "wheels"
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(wheels), str(ROOT)],
        check=True,
    )
    names = zipfile.ZipFile(next(wheels.glob("localserve-*.whl"))).namelist()
    for page in ("index.html", "ui.js", "markdown.js", "ui.css"):
        assert f"localserve/server/ui/{page}" in names
    entry_points = next(n for n in names if n.endswith("entry_points.txt"))
    text = zipfile.ZipFile(next(wheels.glob("localserve-*.whl"))).read(entry_points).decode()
    assert "localserve-tray = localserve_tray:main" in text
