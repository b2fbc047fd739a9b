"""An onnxruntime-genai model: its execution provider, tokenizer and how its batches run.

A model's requests are batched one of three ways, the first that works:

- **onnxruntime-genai's dynamic Engine** (paged KV cache): requests join and leave between
  steps. It needs a model exported with a paged cache and a provider that has one (CUDA,
  WebGPU).
- **our own rows** on the CPU (backends/onnx_rows.py): one onnxruntime session over a KV buffer
  of one row per request, so a request joins the running batch at the next step. It takes the
  decoders onnxruntime-genai's builder exports (`onnx_rows.fits`).
- **onnxruntime-genai's static Engine**, for any other model: a batch runs until its last
  request ends and later requests wait for the next one (engine/batching/onnx_batcher.py forms
  those batches). It pads prompts of different lengths correctly and samples per request; its
  lower-level `Generator` does not (in 0.18 `append_tokens` builds no padding mask, so a batch
  of prompts of different lengths decodes garbage).

onnxruntime-genai always provides the tokenizer. An Engine may only be used from the thread
that created it, so the batcher creates it on the device's engine thread (`new_engine`), never
here on the loading thread.
"""

from __future__ import annotations

import json
import logging
import os
from dataclasses import dataclass
from typing import Any

from localserve.backends.base import TurnEnd, TurnEvent
from localserve.backends.onnx_rows import RowBatch, fits
from localserve.backends.onnx_vocab import load_token_bytes
from localserve.formats.onnx import (
    PROVIDER_ENV,
    OnnxFolder,
    available,
    kv_cache_type,
    read_folder,
)
from localserve.ground.errors import BadRequest, LoadFailed
from localserve.ground.model import ModelInfo
from localserve.ground.sampling import SamplingParams

log = logging.getLogger(__name__)

# Providers whose onnxruntime-genai Engine has a paged KV cache (continuous batching).
PAGED_PROVIDERS = ("cuda", "webgpu")
# Set to 1 to batch with onnxruntime-genai's static Engine even where our own rows would run.
STATIC_ENV = "LOCALSERVE_ONNX_STATIC"


@dataclass(frozen=True)
class OnnxOptions:
    max_batch_size: int
    # Tokens per request, prompt included; also the per-row length of the KV buffers.
    max_length: int
    n_threads: int
    # "auto": $LOCALSERVE_ONNX_PROVIDER, else the provider the folder was exported for.
    provider: str = "auto"


def choose_provider(folder: OnnxFolder, requested: str = "auto") -> str:
    """The provider asked for (argument, then environment), else the one the model was built for.

    A model is exported for one provider (its graph's operators and I/O types follow it); when
    that provider is missing here, the CPU runs it, and we say so once.
    """
    wanted = (os.environ.get(PROVIDER_ENV) or requested or "auto").lower()
    if wanted == "auto":
        wanted = folder.built_for
    if wanted != "cpu" and not available(wanted):
        log.warning(
            "%s: execution provider '%s' is not available here; running on the CPU",
            folder.path.name,
            wanted,
        )
        return "cpu"
    return wanted


class OnnxGenaiBackend:
    """A loaded onnxruntime-genai model, a `BatchRuntime`: tokenizer, token bytes, its Engine."""

    def __init__(self, name: str, path: str, opts: OnnxOptions) -> None:
        try:
            import onnxruntime_genai as og
        except ImportError:
            raise LoadFailed(
                f"cannot load '{name}': ONNX models need onnxruntime-genai "
                "(pip install 'localserve[onnx]', or 'localserve[onnx-cuda]' for NVIDIA GPUs)"
            ) from None

        self._og = og
        # The Engine and its requests by our key (and our key by id() of og's request); made
        # on the engine thread by new_engine.
        self._engine: Any = None
        self._events: Any = None
        self._flags = (0, 0, 0)
        self._requests: dict[int, tuple[Any, int]] = {}
        self._keys: dict[int, int] = {}
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
            raise LoadFailed(
                f"onnxruntime-genai could not load '{name}' from {path}: {exc}"
            ) from None
        n_vocab = self.folder.n_vocab or 1
        self._pieces, self._specials = load_token_bytes(
            path, n_vocab, lambda t: self.tokenizer.decode([t])
        )
        self._n_vocab = max(n_vocab, len(self._pieces))
        eos = set(self.folder.eos_ids) | {int(t) for t in self.tokenizer.eos_token_ids}
        self.eos_ids = frozenset(eos)
        # Our own rows where they run this model (the CPU); then og's model serves only the
        # tokenizer, which outlives it, and its weights are let go.
        self.rows = None if self.continuous else self._row_batch()
        if self.rows is not None:
            self.continuous = True
            self.model = None
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
            quantization=self.folder.quantization,
            kv_cache_type=kv_cache_type(self.provider),
            flash_attention="n/a",  # its attention kernels are the export's, not a setting
        )
        log.info(
            "%s: onnxruntime-genai %s on %s, %s batching, up to %d sequences of %d tokens",
            name,
            og.__version__,
            self.provider,
            "continuous (rows)" if self.rows else "dynamic" if self.continuous else "static",
            self.max_batch_size,
            self.max_length,
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

    def _row_batch(self) -> RowBatch | None:
        """Our own continuous batch, where this model and provider allow it; else None."""
        if self.provider != "cpu" or os.environ.get(STATIC_ENV, "") == "1":
            return None
        why = fits(self.folder.genai)
        if why is None:
            try:
                return RowBatch(
                    self.folder.path,
                    self.folder.genai,
                    self.max_batch_size,
                    self.max_length,
                    self.n_threads,
                    self.eos_ids,
                )
            except Exception as exc:  # a graph that does not match its config
                why = str(exc)
        log.info(
            "%s: batched by onnxruntime-genai's static Engine (%s)", self.folder.path.name, why
        )
        return None

    def _dynamic_batching_works(self) -> bool:
        """Whether this model and provider take the paged-cache Engine (a throwaway probe)."""
        og = self._og
        try:
            og.Engine(og.Model(self._config(continuous=True)))
            return True
        except Exception as exc:  # the model has no paged cache, or the provider none
            log.info(
                "%s: no dynamic batching on %s (%s)", self.folder.path.name, self.provider, exc
            )
            return False

    # -- the Vocabulary surface ---------------------------------------------------------------

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
        # The model, tokenizer, Engine and rows free with their last reference.
        self._engine = None
        self.rows = None
        self._requests.clear()
        self._keys.clear()
        self.tokenizer = None
        self.model = None

    def check_sampling(self, p: SamplingParams) -> None:
        """No grammar or logit bias (no logits to mask); on onnxruntime-genai's Engine, nothing
        it does not sample with (`engine_lacks`). Our own rows honour every other field."""
        what, field = _constraint(p)
        if field is None and self.rows is None:
            field = engine_lacks(p, per_turn_seed=self.continuous)
            kind = "dynamic" if self.continuous else "static"
            what = f"'{field}': onnxruntime-genai's {kind} Engine runs it, and samples without"
        if field is not None:
            raise BadRequest(f"model '{self.info.name}' (onnx) does not support {what}", field)

    # -- the BatchRuntime surface: what engine/batching/onnx_batcher.py steps ----------------------

    def new_engine(self) -> None:
        if self.rows is not None:
            self.rows.reset()
            return
        og = self._og
        self._requests.clear()
        self._keys.clear()
        self._engine = og.Engine(self.model)
        self._events = self._engine.create_event_buffer(4 * self.max_batch_size)
        self._flags = (
            og.EngineEventFlags.TOKEN.value,
            og.EngineEventFlags.TURN_FINISHED.value,
            og.EngineEventFlags.FAILED.value,
        )

    def begin(self, key: int, tokens: list[int], params: SamplingParams, max_new: int) -> None:
        if self.rows is not None:
            self.rows.begin(key, tokens, params, max_new)
            return
        import numpy as np

        og = self._og
        request = self._engine.create_request()
        turn = og.TurnOptions(request)
        if params.greedy:
            turn.set_do_sample(False)
        else:
            turn.set_do_sample(True)
            turn.set_temperature(params.temperature)
            turn.set_top_k(max(0, params.top_k))
            turn.set_top_p(min(1.0, max(0.0, params.top_p)) or 1.0)
        if params.seed is not None and self.continuous:
            # A static Engine takes no per-turn seed: check_sampling refused a sampled one.
            turn.set_seed(params.seed & 0x7FFFFFFF)
        if params.repeat_penalty > 0 and params.repeat_penalty != 1.0:
            turn.set_repetition_penalty(params.repeat_penalty)
        turn.set_max_generated_tokens(max(1, max_new))
        if params.ignore_eos:
            turn.set_min_generated_tokens(max(1, max_new))
        turn_id = request.begin_turn(np.asarray(tokens, dtype=np.int32), turn)
        # Holding the request keeps its id() from being reused while events may name it.
        self._requests[key] = (request, int(turn_id))
        self._keys[id(request)] = key

    def run(self) -> list[TurnEvent]:
        if self.rows is not None:
            return self.rows.run()
        events = (self._event(e) for e in self._engine.run(self._events))
        return [e for e in events if e is not None]

    def release(self, key: int, cancel: bool) -> None:
        if self.rows is not None:
            self.rows.release(key)
            return
        held = self._requests.pop(key, None)
        if held is None:
            return
        request, turn = held
        self._keys.pop(id(request), None)
        try:
            if cancel:
                request.cancel_turn(turn)
            request.close()
        except Exception:  # the Engine already let go of it
            log.debug("could not close a request on %s", self.info.name, exc_info=True)

    def _event(self, event: Any) -> TurnEvent | None:
        """Our own event for one of og's; None for a request already released."""
        key = self._keys.get(id(event.request))
        if key is None:
            return None
        token_flag, finished_flag, failed_flag = self._flags
        flags = event.flags.value
        token = int(event.token) if flags & token_flag else None
        end = None
        if flags & (finished_flag | failed_flag):
            reason = event.finish_reason
            if flags & failed_flag or reason == self._og.FinishReason.FAILED:
                end = TurnEnd.FAILED
            else:
                end = TurnEnd.EOS if reason == self._og.FinishReason.EOS else TurnEnd.LENGTH
        if token is None and end is None:
            return None
        return TurnEvent(key, token, end)


def _constraint(p: SamplingParams) -> tuple[str, str | None]:
    """What of a constrained answer `p` asks for, and its field; ("", None) for none."""
    if p.grammar is not None:
        kind = "structured output" if p.grammar.kind == "json_schema" else "tool calls"
        return kind, p.grammar.field
    if p.logit_bias:
        return "logit_bias", "logit_bias"
    return "", None


def engine_lacks(p: SamplingParams, per_turn_seed: bool) -> str | None:
    """The first field of `p` that onnxruntime-genai's Engine would leave out, if any. Its
    sampler has temperature, top-k, top-p and a repetition penalty only; a per-turn seed is
    taken only where it batches dynamically (0.18 refuses one on a static Engine, whose batch
    shares one random stream). A min_p or seed with greedy decoding changes nothing, so is
    honoured; the server's own min-p default is not the client's and is not refused."""
    if p.min_p and not p.greedy:
        return "min_p"
    if p.presence_penalty:
        return "presence_penalty"
    if p.frequency_penalty:
        return "frequency_penalty"
    if p.seed is not None and not per_turn_seed and not p.greedy:
        return "seed"
    return None
