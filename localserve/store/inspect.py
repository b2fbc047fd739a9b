"""Checking a model before it is registered or loaded, and describing it for `show`.

Every GGUF passes `gguf_file.read_header` first: magic, version, tensor count, and every
tensor's offset and size inside the file. A truncated or malformed file is refused here and
never reaches llama.cpp (Ollama's CVE-2026-7482 was an over-read in its loader on such a file).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path

from localserve.store.gguf_file import BadGGUF, GGUFHeader, read_header


class BadModelFile(ValueError):
    """A file or folder that is not a model we can serve, and why."""


@dataclass(frozen=True)
class ModelFacts:
    format: str
    architecture: str
    parameters: int
    quantization: str
    context_length: int
    has_chat_template: bool
    license: str | None

    def as_dict(self) -> dict[str, object]:
        return asdict(self)


def _quantization(header: GGUFHeader) -> str:
    file_type = header.metadata.get("general.file_type")
    if file_type is None:
        return "unknown"
    try:
        from gguf import LlamaFileType

        return LlamaFileType(int(file_type)).name.removeprefix("MOSTLY_").removeprefix("ALL_")
    except (ImportError, ValueError):
        return f"type {file_type}"


def check_gguf(path: Path | str) -> GGUFHeader:
    try:
        return read_header(str(path))
    except BadGGUF as exc:
        raise BadModelFile(f"{path} is not a usable GGUF model: {exc}") from None
    except OSError as exc:
        raise BadModelFile(f"cannot read {path}: {exc}") from None


def gguf_facts(path: Path | str) -> ModelFacts:
    header = check_gguf(path)
    license_ = header.metadata.get("general.license")
    return ModelFacts(
        format="gguf",
        architecture=header.architecture,
        parameters=sum(t.n_elements for t in header.tensors),
        quantization=_quantization(header),
        context_length=int(header.arch_value("context_length", 0) or 0),
        has_chat_template="tokenizer.chat_template" in header.metadata,
        license=str(license_) if license_ else None,
    )


def check_onnx_folder(folder: Path) -> dict:
    """An onnxruntime-genai model folder: its genai_config.json, and the files it names."""
    config_path = folder / "genai_config.json"
    try:
        config = json.loads(config_path.read_text(encoding="utf-8"))
        decoder = config["model"]["decoder"]
        onnx_name = decoder["filename"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise BadModelFile(f"{folder} is not an onnxruntime-genai model folder: {exc}") from None
    if not (folder / onnx_name).is_file():
        raise BadModelFile(f"{folder} lacks {onnx_name}, which its genai_config.json names")
    return config


def onnx_facts(folder: Path) -> ModelFacts:
    config = check_onnx_folder(folder)
    model = config["model"]
    has_template = (folder / "chat_template.jinja").is_file()
    tok_config = folder / "tokenizer_config.json"
    if tok_config.is_file():
        try:
            has_template = has_template or "chat_template" in json.loads(tok_config.read_text("utf-8"))
        except ValueError:
            pass
    return ModelFacts(
        format="onnx",
        architecture=str(model.get("type", "unknown")),
        parameters=0,  # genai_config.json does not say; 0 reads as unknown
        quantization="int4" if "int4" in folder.name.lower() else "unknown",
        context_length=int(model.get("context_length", 0) or 0),
        has_chat_template=has_template,
        license=None,
    )


def facts(path: Path, fmt: str) -> ModelFacts:
    return onnx_facts(path) if fmt == "onnx" else gguf_facts(path)
