"""An onnxruntime-genai model: its execution provider, tokenizer and generation engine.

onnxruntime-genai's `Engine` runs the batches: it pads prompts of different lengths correctly
and samples per request. (Its lower-level `Generator` does not: in 0.18 `append_tokens` builds
no padding mask, so a batch of prompts of different lengths decodes garbage; it serves only the
benchmark's equal-length static batch.) The Engine comes in two kinds:

- **dynamic batching** (paged KV cache): requests join and leave between steps. It needs a model
  exported with a paged cache and a provider that has one (CUDA, WebGPU).
- **static batching**, everywhere else (the CPU): a batch runs until its last request ends and
  later requests wait for the next one. `engine/onnx_batcher.py` forms those batches.

An Engine may only be used from the thread that created it, so the batcher creates it on the
device's engine thread (`new_engine`), never here on the loading thread.
"""

from __future__ import annotations

import json
import logging
import os
from dataclasses import dataclass
from typing import Any

from localserve.backends.base import ModelInfo
from localserve.backends.onnx_folder import OnnxFolder, read_folder
from localserve.backends.onnx_vocab import load_token_bytes
from localserve.engine.errors import LoadFailed
from localserve.engine.sampling import SamplingParams

log = logging.getLogger(__name__)

# Environment override of the provider choice: cpu, cuda, dml, webgpu, ... ("auto" by default).
PROVIDER_ENV = "LOCALSERVE_ONNX_PROVIDER"
# Providers whose onnxruntime-genai Engine has a paged KV cache (continuous batching).
PAGED_PROVIDERS = ("cuda", "webgpu")


@dataclass(frozen=True)
class OnnxOptions:
    max_batch_size: int = 8
    # Tokens per request, prompt included; also the per-row length of the KV buffers.
    max_length: int = 4096
    n_threads: int = 0
    provider: str = "auto"


def _available(provider: str) -> bool:
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


def choose_provider(folder: OnnxFolder, requested: str = "auto") -> str:
    """The provider asked for (argument, then environment), else the one the model was built for.

    A model is exported for one provider (its graph's operators and I/O types follow it); when
    that provider is missing here, the CPU runs it, and we say so once.
    """
    wanted = (os.environ.get(PROVIDER_ENV) or requested or "auto").lower()
    if wanted == "auto":
        wanted = folder.built_for
    if wanted != "cpu" and not _available(wanted):
        log.warning(
            "%s: execution provider '%s' is not available here; running on the CPU",
            folder.path.name, wanted,
        )
        return "cpu"
    return wanted


def provider_for_estimate(folder: OnnxFolder, requested: str = "auto") -> str:
    """The provider a load will pick, without logging (the estimate runs before the load)."""
    wanted = (os.environ.get(PROVIDER_ENV) or requested or "auto").lower()
    wanted = folder.built_for if wanted == "auto" else wanted
    return wanted if wanted == "cpu" or _available(wanted) else "cpu"


class OnnxGenaiBackend:
    """A loaded onnxruntime-genai model: tokenizer, token bytes, and the Engine's settings."""

    def __init__(self, name: str, path: str, opts: OnnxOptions) -> None:
        try:
            import onnxruntime_genai as og
        except ImportError:
            raise LoadFailed(
                f"cannot load '{name}': ONNX models need onnxruntime-genai "
                "(pip install 'localserve[onnx]', or 'localserve[onnx-cuda]' for NVIDIA GPUs)"
            ) from None

        self._og = og
        self.folder = read_folder(path)
        self.provider = choose_provider(self.folder, opts.provider)
        self.max_batch_size = max(1, opts.max_batch_size)
        self.max_length = max(2, min(opts.max_length, self.folder.context_length))
        self.n_threads = opts.n_threads
        self.continuous = self.provider in PAGED_PROVIDERS and self._dynamic_batching_works()
        try:
            self.model = og.Model(self._config(continuous=self.continuous))
            self.tokenizer = og.Tokenizer(self.model)
        except Exception as exc:
            raise LoadFailed(f"onnxruntime-genai could not load '{name}' from {path}: {exc}") from None
        n_vocab = self.folder.n_vocab or 1
        self._pieces, self._specials = load_token_bytes(
            path, n_vocab, lambda t: self.tokenizer.decode([t])
        )
        self._n_vocab = max(n_vocab, len(self._pieces))
        eos = set(self.folder.eos_ids) | {int(t) for t in self.tokenizer.eos_token_ids}
        self.eos_ids = frozenset(eos)
        self.bos_id = int(self.tokenizer.bos_token_id)
        self.info = ModelInfo(
            name=name,
            path=str(self.folder.path),
            format="onnx",
            n_slots=self.max_batch_size,
            n_ctx_slot=self.max_length,
            n_ctx_train=self.folder.context_length,
            size_bytes=self.folder.weights_bytes,
            chat_template=self.folder.chat_template(),
            bos_text=self.folder.special_text("bos_token"),
            eos_text=self.folder.special_text("eos_token"),
            add_bos=self.folder.add_bos,
            architecture=self.folder.architecture,
            quantization=_quantization(self.folder),
        )
        log.info(
            "%s: onnxruntime-genai %s on %s, %s batching, up to %d sequences of %d tokens",
            name, og.__version__, self.provider, "dynamic" if self.continuous else "static",
            self.max_batch_size, self.max_length,
        )

    def _config(self, continuous: bool) -> Any:
        og = self._og
        config = og.Config(str(self.folder.path))
        config.clear_providers()
        if self.provider != "cpu":
            config.append_provider(self.provider)
        batching = "dynamic_batching" if continuous else "static_batching"
        overlay: dict[str, Any] = {
            "search": {"max_length": self.max_length},
            "engine": {batching: {"max_batch_size": self.max_batch_size}},
        }
        if self.n_threads > 0:
            session = {"intra_op_num_threads": self.n_threads}
            overlay["model"] = {"decoder": {"session_options": session}}
        config.overlay(json.dumps(overlay))
        return config

    def _dynamic_batching_works(self) -> bool:
        """Whether this model and provider take the paged-cache Engine (a throwaway probe)."""
        og = self._og
        try:
            og.Engine(og.Model(self._config(continuous=True)))
            return True
        except Exception as exc:  # the model has no paged cache, or the provider none
            log.info("%s: no dynamic batching on %s (%s)", self.folder.path.name, self.provider, exc)
            return False

    # -- the Backend surface the engine uses ------------------------------------------------

    def tokenize(self, text: str, add_special: bool) -> list[int]:
        tokens = [int(t) for t in self.tokenizer.encode(text)]
        if add_special and self.info.add_bos and (not tokens or tokens[0] != self.bos_id):
            tokens.insert(0, self.bos_id)
        return tokens

    def token_piece(self, token: int) -> bytes:
        return self._pieces[token] if 0 <= token < len(self._pieces) else b""

    def is_end_of_generation(self, token: int) -> bool:
        return token in self.eos_ids

    @property
    def n_vocab(self) -> int:
        return self._n_vocab

    def close(self) -> None:
        # The Engine belongs to the batcher; the model and tokenizer free with their last reference.
        self.tokenizer = None
        self.model = None

    # -- what the batcher asks of the runtime ------------------------------------------------

    def new_engine(self) -> Any:
        """A fresh og.Engine; call it on the thread that will use it."""
        return self._og.Engine(self.model)

    def begin(
        self, engine: Any, tokens: list[int], params: SamplingParams, max_new: int
    ) -> tuple[Any, int]:
        """Add one request to the engine with its own sampling; returns it and its turn's id."""
        import numpy as np

        og = self._og
        request = engine.create_request()
        turn = og.TurnOptions(request)
        if params.greedy:
            turn.set_do_sample(False)
        else:
            turn.set_do_sample(True)
            turn.set_temperature(params.temperature)
            turn.set_top_k(max(0, params.top_k))
            turn.set_top_p(min(1.0, max(0.0, params.top_p)) or 1.0)
        if params.seed is not None and self.continuous:
            # A static Engine takes no per-turn seed (it shares one random stream per batch):
            # there a seeded request still samples, only not reproducibly.
            turn.set_seed(params.seed & 0x7FFFFFFF)
        if params.repeat_penalty > 0 and params.repeat_penalty != 1.0:
            turn.set_repetition_penalty(params.repeat_penalty)
        turn.set_max_generated_tokens(max(1, max_new))
        if params.ignore_eos:
            turn.set_min_generated_tokens(max(1, max_new))
        turn_id = request.begin_turn(np.asarray(tokens, dtype=np.int32), turn)
        return request, int(turn_id)


def _quantization(folder: OnnxFolder) -> str:
    """int4/int8 from the builder's precision, which it writes only into the folder's name."""
    name = folder.path.name.lower()
    for tag in ("int4", "int8", "fp16", "bf16", "fp32"):
        if tag in name:
            return tag
    return "unknown"
