"""A model's identity and facts, as every layer names them.

`ModelRef` is what the store hands the engine (a served name, a file or folder, a format);
`ModelFacts` is what inspecting the file tells before a load; `ModelInfo` is what a loaded
model tells the engine and the API faces.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from localserve.ground.token_floor import TokenFloor


@dataclass(frozen=True)
class ModelRef:
    """A model's served name, the file (or, for ONNX, the folder) that holds it, and its format."""

    name: str
    path: str
    format: str = "gguf"
    # The smaller model that drafts its tokens (settings' draft_model), loaded with it.
    draft: ModelRef | None = None


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
    # The texts of its fill-in-the-middle tokens (prefix, suffix, middle); None: it has none.
    fim_tokens: tuple[str, str, str] | None = None
    # The texts of the tokens that end its turn (end of sequence, end of turn): Ollama's `stop`.
    stop_tokens: tuple[str, ...] = ()

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
    # Fill-in-the-middle: the (prefix, suffix, middle) token ids, as llama.cpp finds them (the
    # GGUF's fim_*_token_id keys, or the family's known token texts); None: it cannot fill.
    fim: tuple[int, int, int] | None = None
    # The repo-level FIM tokens (repo name, file separator) for /infill's extra files; -1: none.
    fim_repo: tuple[int, int] = (-1, -1)
    # The KV cache's type and flash attention as loaded (ground/kv_cache.py); ONNX: its own.
    kv_cache_type: str = "f16"
    flash_attention: str = "auto"
    # The fewest tokens a text can be, known without tokenizing it; None: its tokenizer has no
    # such bound (ground/token_floor.py).
    token_floor: TokenFloor | None = None
