"""Test copies of a real GGUF with some metadata changed (the gguf package rewrites it): a chat
template that takes tools, FIM token ids. The weights are the original's, byte for byte."""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any

# The copy's progress bar, in every test log; tqdm reads this when it is imported.
os.environ.setdefault("TQDM_DISABLE", "1")

import gguf
from gguf.scripts.gguf_new_metadata import MetadataDetails, copy_with_new_metadata

from localserve.store.resolve import resolve

_TYPES = {str: gguf.GGUFValueType.STRING, int: gguf.GGUFValueType.UINT32}


def model_file(name: str = "smollm2") -> Path:
    return Path(resolve(name).path)


def copy_with(dst: Path, changes: dict[str, Any], src: Path | None = None) -> Path:
    """Write `src` (SmolLM2 by default) to `dst` with the metadata keys in `changes` set."""
    src = src or model_file()
    reader = gguf.GGUFReader(src, "r")
    arch = reader.get_field(gguf.Keys.General.ARCHITECTURE).contents()
    writer = gguf.GGUFWriter(dst, arch=arch, endianess=reader.endianess)
    new = {key: MetadataDetails(_TYPES[type(value)], value) for key, value in changes.items()}
    logging.getLogger("gguf-new-metadata").setLevel(logging.WARNING)
    copy_with_new_metadata(reader, writer, new, [])
    return dst
