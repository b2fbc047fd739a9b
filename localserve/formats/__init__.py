"""The model formats, one table entry each: how a model sits on disk, how to check it, what it says.

This floor knows file formats and nothing above them: the store asks it to recognize, check and
describe a model, the engine asks it to size one before a load, the backends read their files
through it. A format's name is what manifests, the catalog and `ModelRef.format` carry; every
question about a model picks its entry here by that name, so a new format is one more entry
(and the loader's own table entry for its runtime), never another `if fmt == ...` branch.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from localserve.formats import gguf, onnx
from localserve.formats.errors import BadModelFile
from localserve.formats.memory import MemoryEstimate
from localserve.ground.model import ModelFacts

__all__ = [
    "FORMATS",
    "BadModelFile",
    "Format",
    "MemoryEstimate",
    "chat_template",
    "detect",
    "facts",
    "file_format",
    "folder_format",
    "format_named",
]


@dataclass(frozen=True)
class Format:
    """One model format: its layout on disk and what can be learned from it without a load.

    A model is either one file (`suffix`: how such files are named) or a folder (`marker`: the
    file that makes a folder one). `facts` and `chat_template` parse and bounds-check the
    model first, and raise BadModelFile for one we cannot serve.
    """

    name: str
    facts: Callable[[Path], ModelFacts]
    chat_template: Callable[[Path], str | None]
    suffix: str | None = None
    marker: str | None = None

    @property
    def is_folder(self) -> bool:
        return self.marker is not None

    def claims(self, path: Path) -> bool:
        """Whether `path` is laid out as a model of this format (a check may still refuse it).

        A one-file format claims any file: llama.cpp's files need no suffix (Ollama's blobs have
        none), and one that is no GGUF is refused by its check, with the reason.
        """
        if self.marker is not None:
            return path.is_dir() and (path / self.marker).is_file()
        return path.is_file()

    def served_name(self, path: Path) -> str:
        """The name a model at `path` is served under when none is given: its file's stem, or
        its folder's name."""
        return path.name if self.is_folder else path.stem


FORMATS: dict[str, Format] = {
    "gguf": Format("gguf", gguf.gguf_facts, gguf.gguf_chat_template, suffix=".gguf"),
    "onnx": Format("onnx", onnx.onnx_facts, onnx.onnx_chat_template, marker=onnx.MARKER),
}


def format_named(fmt: str) -> Format:
    try:
        return FORMATS[fmt]
    except KeyError:
        raise BadModelFile(
            f"unknown model format '{fmt}': this version serves {', '.join(FORMATS)}"
        ) from None


def detect(path: Path) -> Format | None:
    """The format whose layout `path` has; folder formats first, since only they look inside."""
    ordered = sorted(FORMATS.values(), key=lambda f: not f.is_folder)
    return next((f for f in ordered if f.claims(path)), None)


def folder_format(filenames: Iterable[str]) -> Format | None:
    """The folder format whose marker is among a folder's file names (a scan's walk has them)."""
    names = set(filenames)
    return next((f for f in FORMATS.values() if f.marker in names), None)


def file_format(filename: str) -> Format | None:
    """The one-file format a file's name says it is, by suffix (a scan skips other files)."""
    lower = filename.lower()
    return next((f for f in FORMATS.values() if f.suffix and lower.endswith(f.suffix)), None)


def facts(path: Path | str, fmt: str) -> ModelFacts:
    """What the model says about itself, for `list` and `show`; refuses a broken model."""
    return format_named(fmt).facts(Path(path))


def chat_template(path: Path | str, fmt: str) -> str | None:
    return format_named(fmt).chat_template(Path(path))
