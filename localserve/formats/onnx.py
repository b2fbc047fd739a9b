"""The onnxruntime-genai format: a model folder read without loading it, described, and sized.

A folder holds genai_config.json (shapes, special ids, search defaults), the ONNX graph with its
external weight files, and the Hugging Face tokenizer files (tokenizer.json, tokenizer_config.json,
sometimes chat_template.jinja). `read_folder` is its one parse: the store's check and `show`,
the memory estimate and the backend all read the folder through it.

The estimate is weights (the graph and its external data, mapped whole) + KV buffers + a
prefill's activations. With past_present_share_buffer the KV buffers are sized once for the
whole batch: layers x kv heads x head size x 2 (K and V) x max length x batch size, in the
graph's I/O type (float32 for models exported for the CPU, float16 for GPU exports).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from localserve.formats.errors import BadModelFile
from localserve.formats.memory import MemoryEstimate
from localserve.ground.model import ModelFacts
from localserve.ground.units import F16, F32

MARKER = "genai_config.json"  # the file that makes a folder an onnxruntime-genai model


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

    @property
    def quantization(self) -> str:
        """int4/int8 from the builder's precision, which it writes only into the folder's name."""
        name = self.path.name.lower()
        for tag in ("int4", "int8", "fp16", "bf16", "fp32"):
            if tag in name:
                return tag
        return "unknown"


def _is_weights(name: str) -> bool:
    return name.endswith((".onnx", ".onnx.data", ".onnx_data", ".data")) or ".onnx.data" in name


def read_folder(path: str | Path) -> OnnxFolder:
    """Parse the folder's JSON files; BadModelFile for a folder onnxruntime-genai could not load."""
    folder = Path(path)
    try:
        genai = json.loads((folder / MARKER).read_text(encoding="utf-8"))
        filename = genai["model"]["decoder"]["filename"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise BadModelFile(f"{folder} is not an onnxruntime-genai model folder: {exc}") from None
    if not (folder / filename).is_file():
        raise BadModelFile(f"{folder} lacks {filename}, which its {MARKER} names")
    try:
        tokenizer_config = json.loads((folder / "tokenizer_config.json").read_text("utf-8"))
    except (OSError, ValueError):
        tokenizer_config = {}
    if not isinstance(tokenizer_config, dict):
        tokenizer_config = {}
    return OnnxFolder(folder, genai, tokenizer_config)


def onnx_facts(path: str | Path) -> ModelFacts:
    folder = read_folder(path)
    return ModelFacts(
        format="onnx",
        architecture=folder.architecture,
        parameters=0,  # genai_config.json does not say; 0 reads as unknown
        quantization=folder.quantization,
        context_length=int(folder.genai["model"].get("context_length", 0) or 0),
        has_chat_template=folder.chat_template() is not None,
        license=None,
        embedding_length=folder.n_embd,
    )


def onnx_chat_template(path: str | Path) -> str | None:
    return read_folder(path).chat_template()


# -- sizing --------------------------------------------------------------------------------------


def kv_cache_type(provider: str) -> str:
    """The type onnxruntime-genai keeps K and V in: the graph's I/O type, as the export chose
    it, not a setting."""
    return "f32" if provider == "cpu" else "f16"


def kv_bytes_per_token(folder: OnnxFolder, provider: str) -> int:
    io_size = F32 if kv_cache_type(provider) == "f32" else F16
    return folder.n_layer * folder.n_head_kv * folder.head_size * 2 * io_size


def estimate_onnx(
    folder: OnnxFolder, provider: str, max_batch_size: int, max_length: int, prefill_tokens: int
) -> MemoryEstimate:
    """`prefill_tokens`: the longest prompt a batch prefills at once, per row.

    A prefill's activations are the larger of two ways a model runs: onnxruntime-genai's static
    Engine prefills a whole batch's prompts at once (the graph then returns each row's last
    logits only), and our own rows on the CPU (backends/onnx_rows.py) prefill one whole prompt
    of up to `max_length` tokens in one run, which returns the logits of every position.
    """
    kv = kv_bytes_per_token(folder, provider) * max_length * max_batch_size
    prefill = min(prefill_tokens, max_length)
    batch = _prefill_bytes(folder, max_batch_size, prefill, max_batch_size)
    one_prompt = _prefill_bytes(folder, 1, max_length, max_length)
    return MemoryEstimate(folder.weights_bytes, kv, max(batch, one_prompt))


def _prefill_bytes(folder: OnnxFolder, rows: int, tokens: int, logits_rows: int) -> int:
    """About 16 hidden-size rows per prompt token across the widest layer (the MLP's up
    projection and its activation), the attention scores of each head, and the float32 logits
    rows the graph returns. Measured for SmolLM2 int4 on the CPU: 8 prompts of 482 tokens grew
    the daemon by about 470 MB, against 690 MB estimated here."""
    activations = rows * tokens * 16 * folder.n_embd * F32
    scores = rows * folder.n_head * tokens * tokens * F32
    return activations + scores + logits_rows * folder.n_vocab * F32


# -- which execution provider a folder runs on -------------------------------------------------

# Environment override of the provider choice: cpu, cuda, dml, webgpu, ... ("auto" by default).
PROVIDER_ENV = "LOCALSERVE_ONNX_PROVIDER"


def available(provider: str) -> bool:
    """Whether onnxruntime-genai, as installed, runs this execution provider here."""
    import onnxruntime_genai as og

    probes = {
        "cpu": lambda: True,
        "cuda": og.is_cuda_available,
        "dml": og.is_dml_available,
        "webgpu": og.is_webgpu_available,
        "qnn": og.is_qnn_available,
        "openvino": og.is_openvino_available,
    }
    probe = probes.get(provider.lower())
    try:
        return bool(probe()) if probe else False
    except Exception:  # a probe that cannot even ask the runtime means no
        return False


def provider_for_estimate(folder: OnnxFolder, requested: str = "auto") -> str:
    """The provider a load will pick, without logging (the estimate runs before the load)."""
    wanted = (os.environ.get(PROVIDER_ENV) or requested or "auto").lower()
    wanted = folder.built_for if wanted == "auto" else wanted
    return wanted if wanted == "cpu" or available(wanted) else "cpu"
