"""A model's identity and facts, as every layer names them.

`ModelRef` is what the store hands the engine (a served name, a file or folder, a format);
`ModelFacts` is what inspecting the file tells before a load; `ModelInfo` is what a loaded
model tells the engine and the API faces.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class ModelRef:
    """A model's served name, the file (or, for ONNX, the folder) that holds it, and its format."""

    name: str
    path: str
    format: str = "gguf"


@dataclass(frozen=True)
class ModelFacts:
    format: str
    architecture: str
    parameters: int
    quantization: str
    context_length: int
    has_chat_template: bool
    license: str | None
    embedding_length: int = 0
    basename: str | None = None  # general.basename (or general.name): the model's own name
    # What it can be asked for, in Ollama's words: "completion", "embedding".
    capabilities: tuple[str, ...] = ("completion",)

    def as_dict(self) -> dict[str, object]:
        return asdict(self)


@dataclass(frozen=True)
class ModelInfo:
    """What the engine and the API faces need to know about a loaded model."""

    name: str
    path: str
    format: str
    n_slots: int
    n_ctx_slot: int
    n_ctx_train: int
    size_bytes: int
    chat_template: str | None
    bos_text: str
    eos_text: str
    add_bos: bool
    architecture: str = "unknown"
    quantization: str = "unknown"
    n_params: int = 0
    n_embd: int = 0
