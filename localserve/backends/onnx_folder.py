"""What an onnxruntime-genai model folder says about itself, read without loading it.

A folder holds genai_config.json (shapes, special ids, search defaults), the ONNX graph with its
external weight files, and the Hugging Face tokenizer files (tokenizer.json, tokenizer_config.json,
sometimes chat_template.jinja). Both the memory estimate and the backend read it from here.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from localserve.engine.errors import LoadFailed


@dataclass(frozen=True)
class OnnxFolder:
    path: Path
    genai: dict[str, Any]
    tokenizer_config: dict[str, Any]

    @property
    def decoder(self) -> dict[str, Any]:
        return self.genai.get("model", {}).get("decoder", {})

    @property
    def architecture(self) -> str:
        return str(self.genai.get("model", {}).get("type", "unknown"))

    @property
    def n_layer(self) -> int:
        return int(self.decoder.get("num_hidden_layers", 0))

    @property
    def n_head(self) -> int:
        return int(self.decoder.get("num_attention_heads") or 1)

    @property
    def n_head_kv(self) -> int:
        d = self.decoder
        return int(d.get("num_key_value_heads") or d.get("num_attention_heads") or 0)

    @property
    def head_size(self) -> int:
        d = self.decoder
        heads = int(d.get("num_attention_heads") or 1)
        return int(d.get("head_size") or int(d.get("hidden_size", 0)) // heads)

    @property
    def n_embd(self) -> int:
        return int(self.decoder.get("hidden_size", 0))

    @property
    def n_vocab(self) -> int:
        return int(self.genai.get("model", {}).get("vocab_size", 0))

    @property
    def context_length(self) -> int:
        model = self.genai.get("model", {})
        search = self.genai.get("search", {})
        return int(model.get("context_length") or search.get("max_length") or 4096)

    @property
    def eos_ids(self) -> tuple[int, ...]:
        eos = self.genai.get("model", {}).get("eos_token_id", [])
        return tuple(int(e) for e in (eos if isinstance(eos, list) else [eos]))

    @property
    def built_for(self) -> str:
        """The execution provider the graph was exported for: the one its session options name."""
        options = self.decoder.get("session_options", {}).get("provider_options", [])
        for entry in options:
            if isinstance(entry, dict) and entry:
                return str(next(iter(entry))).lower()
        return "cpu"

    @property
    def weight_files(self) -> list[Path]:
        """The graph and its external data: everything the session maps into memory."""
        return [p for p in self.path.iterdir() if p.is_file() and _is_weights(p.name)]

    @property
    def weights_bytes(self) -> int:
        return sum(p.stat().st_size for p in self.weight_files)

    def chat_template(self) -> str | None:
        """The folder's own template: chat_template.jinja, else tokenizer_config.json's."""
        jinja = self.path / "chat_template.jinja"
        if jinja.is_file():
            return jinja.read_text(encoding="utf-8")
        template = self.tokenizer_config.get("chat_template")
        if isinstance(template, list):  # named templates: the default one serves chat
            named = {t.get("name"): t.get("template") for t in template if isinstance(t, dict)}
            template = named.get("default")
        return template if isinstance(template, str) else None

    def special_text(self, key: str) -> str:
        """bos_token / eos_token as text; tokenizer_config writes them as a string or a dict."""
        value = self.tokenizer_config.get(key)
        if isinstance(value, dict):
            value = value.get("content")
        return value if isinstance(value, str) else ""

    @property
    def add_bos(self) -> bool:
        return bool(self.tokenizer_config.get("add_bos_token", False))


def _is_weights(name: str) -> bool:
    return name.endswith((".onnx", ".onnx.data", ".onnx_data", ".data")) or ".onnx.data" in name


def read_folder(path: str | Path) -> OnnxFolder:
    """Parse the folder's JSON files; refuse a folder onnxruntime-genai could not load."""
    folder = Path(path)
    try:
        genai = json.loads((folder / "genai_config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise LoadFailed(f"cannot read {folder / 'genai_config.json'}: {exc}") from None
    filename = genai.get("model", {}).get("decoder", {}).get("filename", "model.onnx")
    if not (folder / filename).is_file():
        raise LoadFailed(f"the ONNX model folder {folder} has no {filename}")
    try:
        tokenizer_config = json.loads((folder / "tokenizer_config.json").read_text("utf-8"))
    except (OSError, ValueError):
        tokenizer_config = {}
    return OnnxFolder(folder, genai, tokenizer_config)
