"""The GGUF backend: llama.cpp through llama-cpp-python's low-level ctypes API.

One model gets one llama_context with `n_seq_max` equal to its slot count, so one KV cache,
allocated at load, serves every slot, each a sequence id (not `Llama`: it serves one at a time).

The same context embeds: `embed` switches it to embeddings mode for one decode and returns every
token's hidden state; the engine pools them. The context is created with pooling NONE on
purpose: with one KV stream per slot, llama.cpp splits a batch into micro-batches holding an
equal number of tokens of each sequence, and its own pooling then averages only the last
micro-batch of a longer input (measured: cosine 0.90 against the input embedded alone).
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass, replace

import llama_cpp as ll
import numpy as np

from localserve.backends.guides import Guides
from localserve.backends.llama_drafts import DraftJudges
from localserve.backends.llama_model_info import meta, model_info
from localserve.backends.llama_runtime import capture, device_list, ensure_backend, reported_buffers
from localserve.backends.llama_sampler import sampler_chain
from localserve.ground import kv_cache
from localserve.ground.errors import LoadFailed
from localserve.ground.sampling import SamplingParams
from localserve.ground.step import StepPlan

# The GGUF key `{arch}.pooling_type` holds llama_pooling_type; a generative model has none, and
# then its hidden states are averaged, as Ollama does. RANK (rerankers) cannot embed.
_POOLING = {
    ll.LLAMA_POOLING_TYPE_MEAN: "mean",
    ll.LLAMA_POOLING_TYPE_CLS: "cls",
    ll.LLAMA_POOLING_TYPE_LAST: "last",
    ll.LLAMA_POOLING_TYPE_RANK: "none",
}


_NO_ROWS = np.empty(0, dtype=np.intp)
# n_gpu_layers that offloads every layer and the output, whatever the model's depth.
ALL_LAYERS = 1 << 20


@dataclass(frozen=True)
class LlamaCppOptions:
    """How to size a model's context: slots, context per slot, threads, tokens per step."""

    n_slots: int
    n_ctx_slot: int
    n_threads: int
    n_batch: int
    # llama.cpp's extra buffer types (AMX kernels, repacked weights). Off where the probe saw
    # them die: llama.cpp 0.3.36 built with GGML_NATIVE faults in its AMX kernels on some Xeons.
    use_extra_bufts: bool
    # The last `gpu_layers` layers go to `device`, ggml's name for a GPU ("Vulkan0"); with no
    # device the model sees no GPU at all, so that none of its work lands on one.
    gpu_layers: int = 0
    device: str | None = None
    # Per-slot KV streams keep each sequence's attention to its own cells; a unified cache
    # makes every decode token attend across all slots' cells.
    kv_unified: bool = False
    kv_type: str = "f16"  # K's and V's alike; it and flash attention: ground/kv_cache.py
    flash_attention: str = "auto"
    # A smaller GGUF sharing the vocabulary, loaded beside the model to draft its tokens
    # (engine/batching/draft_model.py), with as many slots of as many cells: all on `device`
    # when the model is, else all on the CPU.
    draft_path: str | None = None


class LlamaCppBackend:
    """A GGUF model loaded with its slots' KV cache and a sampler per busy slot.

    A `SlotBackend` (backends/base.py) that is also an `EmbeddingBackend` and has `SlotStates`
    (engine/batching/slots.py): its slots' cells can be copied, saved and restored.
    """

    def __init__(self, name: str, path: str, options: LlamaCppOptions) -> None:
        ensure_backend()
        self._options = options
        capture.lines = []
        try:
            self._load(name, path, options)
            self.buffers = reported_buffers(capture.lines)
        finally:
            capture.lines = None
        self.draft: LlamaCppBackend | None = None
        if options.draft_path is not None:
            try:
                self.draft = self._load_draft(options.draft_path)
            except BaseException:
                self.close()
                raise

    def _load_draft(self, path: str) -> LlamaCppBackend:
        options = replace(self._options, draft_path=None, gpu_layers=0, device=None)
        if self._options.device and self._options.gpu_layers > ll.llama_model_n_layer(self._model):
            options = replace(options, gpu_layers=ALL_LAYERS, device=self._options.device)
        draft = LlamaCppBackend(f"{self.info.name} draft", path, options)
        if (mismatch := self._vocabulary_mismatch(draft)) is not None:
            draft.close()
            raise LoadFailed(
                f"{path} cannot draft for '{self.info.name}' (--draft-model): {mismatch}"
            )
        for name, size in draft.buffers.items():
            self.buffers[name] = self.buffers.get(name, 0) + size
        return draft

    def _vocabulary_mismatch(self, draft: LlamaCppBackend) -> str | None:
        """Why `draft`'s token ids do not mean what this model's mean, or None: a draft is
        verified token id by token id."""
        if draft.n_vocab != self.n_vocab:
            return f"its vocabulary has {draft.n_vocab} tokens, the model's {self.n_vocab}"
        text = ll.llama_vocab_get_text
        for token in range(self.n_vocab):
            if (theirs := text(draft._vocab, token)) != (ours := text(self._vocab, token)):
                return f"its token {token} is {theirs!r} where the model's is {ours!r}"
        return None

    def _load(self, name: str, path: str, options: LlamaCppOptions) -> None:
        kv_cache.check(options.kv_type, options.flash_attention)
        mparams = ll.llama_model_default_params()
        devices = device_list(options.device)
        # The struct field is a plain pointer: `devices` stays referenced until the load ends.
        mparams.devices = ctypes.cast(devices, ctypes.c_void_p)
        mparams.n_gpu_layers = options.gpu_layers if options.device else 0
        mparams.split_mode = ll.LLAMA_SPLIT_MODE_NONE
        mparams.main_gpu = 0
        mparams.use_extra_bufts = options.use_extra_bufts
        model = ll.llama_model_load_from_file(path.encode(), mparams)
        if not model:
            errors = (line.strip() for line in reversed(capture.lines) if "error" in line.lower())
            reason = next(errors, "")
            raise LoadFailed(f"llama.cpp could not load {path}" + (f": {reason}" if reason else ""))
        self._model = model
        self._vocab = ll.llama_model_get_vocab(model)

        cparams = ll.llama_context_default_params()
        n_batch = max(options.n_batch, options.n_slots)
        cparams.n_ctx = options.n_ctx_slot * options.n_slots
        cparams.n_seq_max = options.n_slots
        cparams.n_batch = n_batch
        cparams.n_ubatch = n_batch
        cparams.n_threads = options.n_threads
        cparams.n_threads_batch = options.n_threads
        cparams.kv_unified = options.kv_unified
        cparams.type_k = cparams.type_v = kv_cache.GGML_TYPES[options.kv_type]
        cparams.flash_attn_type = kv_cache.FLASH_TYPES[options.flash_attention]
        cparams.swa_full = False  # windows' cells only, as llama-server keeps: Gemma 3's KV / 5
        cparams.no_perf = True
        # Per-token rows, pooled by us (see the module docstring); embeddings mode stays off
        # except during an embedding step. A generative model pools nothing already: only an
        # embedding model's own pooling needs turning off (llama.cpp warns when it is).
        arch = meta(model, "general.architecture") or "unknown"
        pooling = meta(model, f"{arch}.pooling_type")
        if pooling and int(pooling) != ll.LLAMA_POOLING_TYPE_NONE:
            cparams.pooling_type = ll.LLAMA_POOLING_TYPE_NONE
        self.pooling = _POOLING.get(int(pooling), "mean") if pooling else "mean"
        cparams.embeddings = False
        ctx = ll.llama_init_from_model(model, cparams)
        if not ctx:
            ll.llama_model_free(model)
            raise LoadFailed(f"llama.cpp could not create a context for {path}")
        self._ctx = ctx
        self._mem = ll.llama_get_memory(ctx)
        self._n_swa = int(ll.llama_model_n_swa(model))
        self._n_batch = n_batch
        self._batch = ll.llama_batch_init(n_batch, 0, 1)
        for i in range(n_batch):
            self._batch.n_seq_id[i] = 1
        self._samplers: dict[int, ll.llama_sampler_p] = {}
        # Slots whose next token is a plain argmax: numpy does that in ~8 us a row, where
        # llama_sampler_sample spends ~150 us building a candidate list over the whole vocab.
        self._argmax_slots: set[int] = set()
        self._n_vocab = int(ll.llama_vocab_n_tokens(self._vocab))
        self._guides = Guides(self._vocab, self._n_vocab)  # constrained answers, per slot
        self._judges = DraftJudges(self._n_vocab)  # drafts of sampled sequences, per slot
        self._pieces: dict[int, bytes] = {}
        self._piece_buf = ctypes.create_string_buffer(256)
        self._embedding_mode = False
        self._closed = False

        kv = (options.kv_type, options.flash_attention)
        self.info = model_info(name, path, model, ctx, options.n_slots, kv)

    # -- text ---------------------------------------------------------------------------------

    def tokenize(self, text: str, add_special: bool) -> list[int]:
        data = text.encode("utf-8")
        cap = len(data) + 8
        buf = (ll.llama_token * cap)()
        n = ll.llama_tokenize(self._vocab, data, len(data), buf, cap, add_special, True)
        if n < 0:
            cap = -n
            buf = (ll.llama_token * cap)()
            n = ll.llama_tokenize(self._vocab, data, len(data), buf, cap, add_special, True)
        return list(buf[:n])

    def token_piece(self, token: int) -> bytes:
        piece = self._pieces.get(token)
        if piece is None:
            buf = self._piece_buf
            n = ll.llama_token_to_piece(self._vocab, token, buf, len(buf), 0, False)
            if n < 0:
                buf = ctypes.create_string_buffer(-n)
                n = ll.llama_token_to_piece(self._vocab, token, buf, len(buf), 0, False)
            piece = buf.raw[:n]
            self._pieces[token] = piece
        return piece

    @property
    def n_vocab(self) -> int:
        return self._n_vocab

    def is_end_of_generation(self, token: int) -> bool:
        return bool(ll.llama_vocab_is_eog(self._vocab, token))

    # -- slots --------------------------------------------------------------------------------

    def seq_start(self, slot: int, params: SamplingParams, prompt: list[int]) -> None:
        self.seq_end(slot)
        chain = sampler_chain(self._vocab, self._n_vocab, params, prompt)
        self._samplers[slot] = chain
        self._judges.start(slot, params)
        if params.grammar is not None:
            self._guides.start(slot, params.grammar)
        if (
            params.greedy
            and not params.has_penalties
            and not params.infill
            and not params.logit_bias
        ):
            self._argmax_slots.add(slot)

    def seq_end(self, slot: int) -> None:
        self._argmax_slots.discard(slot)
        self._guides.end(slot)
        self._judges.end(slot)
        chain = self._samplers.pop(slot, None)
        if chain is not None:
            ll.llama_sampler_free(chain)

    def seq_trim(self, slot: int, keep: int) -> bool:
        if not ll.llama_memory_seq_rm(self._mem, slot, keep, -1):
            return False
        # Sliding-window layers reuse cells that left the window (swa_full off), so a prefix cut
        # back further lacks cells its next token needs: llama-server checks the same.
        if keep > 0 and self._n_swa > 0:
            return ll.llama_memory_seq_pos_min(self._mem, slot) <= max(0, keep - self._n_swa)
        return True

    def seq_copy(self, source: int, slot: int) -> None:
        """Make `slot` hold what `source` holds (the caller trims it to the shared prefix).

        Each slot has its own KV stream, and llama.cpp copies across streams only whole: the
        cells' bookkeeping moves now, the data at the start of the next decode, before that
        decode writes anything.
        """
        ll.llama_memory_seq_cp(self._mem, source, slot, -1, -1)

    def seq_save(self, slot: int) -> bytearray:
        """The cells of `slot`, serialized by llama.cpp, for seq_restore into any slot."""
        size = ll.llama_state_seq_get_size(self._ctx, slot)
        state = bytearray(size)
        buf = (ctypes.c_uint8 * size).from_buffer(state)
        written = ll.llama_state_seq_get_data(self._ctx, buf, size, slot)
        del buf  # a bytearray cannot shrink while a ctypes view of it exists
        if written != size:
            del state[written:]
        return state

    def seq_restore(self, slot: int, state: bytearray) -> bool:
        """Make `slot` hold the cells saved by seq_save; False if llama.cpp refused them."""
        buf = (ctypes.c_uint8 * len(state)).from_buffer(state)
        return ll.llama_state_seq_set_data(self._ctx, buf, len(state), slot) > 0

    def check_sampling(self, p: SamplingParams) -> None:
        """Refuse before anything streams what the sampler could not honour: a JSON schema
        that cannot be enforced (its grammar is kept for the sequence)."""
        if p.grammar is not None:
            self._guides.check(p.grammar)

    # -- kernels ------------------------------------------------------------------------------

    def step(self, plan: StepPlan) -> list[int]:
        self._set_embedding_mode(False)
        sample_at = self._fill(plan, every_token=False)
        self._decode()
        return self._sample(sample_at)

    def embed(self, plan: StepPlan) -> np.ndarray:
        self._set_embedding_mode(True)
        n = len(self._fill(plan, every_token=True))
        self._decode()
        rows = ll.llama_get_embeddings(self._ctx)
        if not rows:
            raise RuntimeError("llama.cpp returned no embeddings for this step")
        return np.ctypeslib.as_array(rows, shape=(n, self.info.n_embd)).copy()

    def _set_embedding_mode(self, on: bool) -> None:
        # Only on a change: llama.cpp rebuilds its graph when the mode flips.
        if self._embedding_mode != on:
            ll.llama_set_embeddings(self._ctx, on)
            self._embedding_mode = on

    def _fill(self, plan: StepPlan, every_token: bool) -> list[tuple[int, int]]:
        """Load the plan into the batch; returns (slot, batch index) of every output row."""
        if plan.n_tokens > self._n_batch:
            raise ValueError(f"a step of {plan.n_tokens} tokens exceeds n_batch {self._n_batch}")
        batch = self._batch
        token, pos, seq_id, logits = batch.token, batch.pos, batch.seq_id, batch.logits
        n = 0
        out_at: list[tuple[int, int]] = []
        self._judges.clear()
        for chunk in plan.chunks:
            slot = chunk.slot
            p = chunk.start_pos
            for t in chunk.tokens:
                token[n] = t
                pos[n] = p
                seq_id[n][0] = slot
                logits[n] = every_token
                if every_token:
                    out_at.append((slot, n))
                n += 1
                p += 1
            if chunk.sample and not every_token:
                for i in range(n - 1 - chunk.drafts, n):
                    logits[i] = 1
                    out_at.append((slot, i))
                if chunk.drafts:
                    self._judges.drafted(slot, n - 1 - chunk.drafts, chunk.tokens[1:])
        batch.n_tokens = n
        return out_at

    def _decode(self) -> None:
        rc = ll.llama_decode(self._ctx, self._batch)
        if rc != 0:
            raise RuntimeError(f"llama_decode failed with code {rc}")

    def _sample(self, sample_at: list[tuple[int, int]]) -> list[int]:
        """One token per (slot, batch index); output rows follow the batch's logits order."""
        samplers, ctx, argmax_slots, guides = (
            self._samplers,
            self._ctx,
            self._argmax_slots,
            self._guides,
        )
        # Read only for the slots in argmax_slots, and computed whenever there are any.
        argmax: np.ndarray = _NO_ROWS
        if argmax_slots or guides:
            # A view of llama.cpp's own logits buffer: a guide's mask written here is what
            # llama_sampler_sample reads too.
            rows = np.ctypeslib.as_array(
                ll.llama_get_logits(ctx), shape=(len(sample_at), self._n_vocab)
            )
            if argmax_slots:
                argmax = rows.argmax(axis=1)
            for row, (slot, _) in enumerate(sample_at):
                if (guide := guides.get(slot)) is not None:
                    guide.compute()
                    # A greedy slot whose best token is allowed needs no mask at all.
                    if slot in argmax_slots and guide.allows(int(argmax[row])):
                        continue
                    guide.mask(rows[row])
                    if slot in argmax_slots:
                        argmax[row] = rows[row].argmax()

        def plain(row: int, slot: int, i: int) -> int:
            if slot in argmax_slots:
                return int(argmax[row])
            return int(ll.llama_sampler_sample(samplers[slot], ctx, i))

        if self._judges.pending:
            rows = np.ctypeslib.as_array(
                ll.llama_get_logits(ctx), shape=(len(sample_at), self._n_vocab)
            )
            tokens = self._judges.sample(sample_at, rows, plain)
        else:
            tokens = [plain(row, slot, i) for row, (slot, i) in enumerate(sample_at)]
        if guides:
            for token, (slot, _) in zip(tokens, sample_at):
                if (guide := guides.get(slot)) is not None:
                    guide.consume(token)
        return tokens

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self.draft is not None:
            self.draft.close()
        self._judges.close()
        for chain in self._samplers.values():
            ll.llama_sampler_free(chain)
        self._samplers.clear()
        ll.llama_batch_free(self._batch)
        ll.llama_free(self._ctx)
        ll.llama_model_free(self._model)
