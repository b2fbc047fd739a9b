"""The test doubles of the unit tests: one fake slot backend, one fake batch runtime, a
ModelInfo factory, and the fakes a ModelManager is built from (a loader, a library, a batcher).

Fakes specify pure logic only: what the batcher plans, which model the manager evicts. That a
feature works is shown by the integration tests, against real models in real daemons.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from localserve.backends.base import TurnEnd, TurnEvent
from localserve.engine.batching.batcher import Batcher, Embedder
from localserve.engine.batching.embedding import EmbeddingJob
from localserve.engine.batching.sequence import Sequence
from localserve.engine.residency.pools import MemoryPool
from localserve.engine.worker_client.placement import Placement
from localserve.engine.worker_client.resident import ResidentModel
from localserve.engine.worker_client.stream import RequestStream
from localserve.formats import MemoryEstimate
from localserve.formats.offload import LayeredEstimate, unsplit
from localserve.ground.errors import BadRequest, ModelNotFound
from localserve.ground.model import ModelInfo, ModelRef
from localserve.ground.sampling import SamplingParams
from localserve.ground.settings import Settings
from localserve.ground.step import StepPlan

EOS = 0
# What FakeBackend samples: token 7, whose text is "x".
TOKEN = 7
WIDTH = 3


def model_info(name: str = "fake", **overrides: Any) -> ModelInfo:
    """A ModelInfo with plain defaults; name only the fields a test cares about."""
    base = ModelInfo(
        name=name,
        path="-",
        format="gguf",
        n_slots=2,
        n_ctx_slot=64,
        n_ctx_train=64,
        size_bytes=0,
        chat_template=None,
        bos_text="",
        eos_text="",
        add_bos=False,
        n_embd=WIDTH,
    )
    return replace(base, **overrides)


class FakeVocabulary:
    """A character is token 1; every token's text is "x"; `eos` ends a generation."""

    info: ModelInfo
    eos: int | None = EOS
    closed = False

    @property
    def n_vocab(self) -> int:
        return 100

    def tokenize(self, text: str, add_special: bool) -> list[int]:
        return [1] * len(text)

    def token_piece(self, token: int) -> bytes:
        return b"x"

    def is_end_of_generation(self, token: int) -> bool:
        return token == self.eos

    def close(self) -> None:
        self.closed = True


class FakeBackend(FakeVocabulary):
    """A slot backend that samples token 7 forever and embeds a token as a row of its id.

    It records every plan it runs, with its kind ("generate" or "embed"), and every trim.
    """

    pooling = "mean"

    def __init__(self, n_slots: int = 2, n_ctx: int = 64, eos: int | None = EOS) -> None:
        self.info = model_info(n_slots=n_slots, n_ctx_slot=n_ctx, n_ctx_train=n_ctx)
        self.eos = eos
        self.calls: list[tuple[str, StepPlan]] = []
        self.trims: list[tuple[int, int]] = []

    @property
    def plans(self) -> list[StepPlan]:
        """The generation steps run so far."""
        return [plan for kind, plan in self.calls if kind == "generate"]

    def seq_start(self, slot: int, params: SamplingParams, prompt: list[int]) -> None:
        pass

    def seq_end(self, slot: int) -> None:
        pass

    def seq_trim(self, slot: int, keep: int) -> bool:
        self.trims.append((slot, keep))
        return True

    def step(self, plan: StepPlan) -> list[int]:
        self.calls.append(("generate", plan))
        return [TOKEN for c in plan.chunks if c.sample for _ in range(c.drafts + 1)]

    def embed(self, plan: StepPlan) -> np.ndarray:
        self.calls.append(("embed", plan))
        tokens = [t for c in plan.chunks for t in c.tokens]
        return np.repeat(np.array(tokens, dtype=np.float32)[:, None], WIDTH, axis=1)


@dataclass
class FakeTurn:
    """One request in FakeRuntime: its cap, and how far it got."""

    max_new: int
    generated: int = 0


class FakeRuntime(FakeVocabulary):
    """A static-batching runtime, as onnxruntime-genai's Engine on the CPU: every step gives
    each running turn token 7, and a turn ends by itself at its max_new tokens.

    It records the tokens each request began with (`begun`), the keys of the turns it was told
    to cancel (`cancelled`), and how many engines it started.
    """

    max_batch_size = 8
    continuous = False
    eos_ids = frozenset({EOS})

    def __init__(self) -> None:
        self.info = model_info(format="onnx", n_slots=8, n_ctx_slot=256, n_ctx_train=256)
        self.turns: dict[int, FakeTurn] = {}
        self.begun: list[list[int]] = []
        self.cancelled: list[int] = []
        self.engines = 0

    def new_engine(self) -> None:
        self.turns.clear()
        self.engines += 1

    def begin(self, key: int, tokens: list[int], params: SamplingParams, max_new: int) -> None:
        self.begun.append(tokens)
        self.turns[key] = FakeTurn(max_new)

    def run(self) -> list[TurnEvent]:
        events = []
        for key, turn in self.turns.items():
            if turn.generated < turn.max_new:
                turn.generated += 1
                end = TurnEnd.LENGTH if turn.generated == turn.max_new else None
                events.append(TurnEvent(key, TOKEN, end))
        return events

    def release(self, key: int, cancel: bool) -> None:
        del self.turns[key]
        if cancel:
            self.cancelled.append(key)


# -- the manager's seams ---------------------------------------------------------------------


class FakeBatcher:
    """A batcher whose work a test sets by hand: `busy` sequences keep its model from idling."""

    def __init__(self) -> None:
        self.waiting: list[object] = []
        self.running: list[object] = []
        self.busy = 0

    def attach(self, wake: Any) -> None:
        pass

    def has_work(self) -> bool:
        return self.busy > 0

    def step(self) -> None:
        pass


class LocalRunner:
    """A batcher in the test's own process, as a resident model's runner (the daemon's is
    RemoteRunner): a submit queues a worker `Sequence` and gives its `RequestStream`; nothing
    steps the batcher unless a test does."""

    def __init__(self, vocab: Any, batcher: Batcher) -> None:
        self.vocab = vocab
        self.batcher = batcher
        self.sequences: dict[int, Sequence] = {}

    @property
    def n_vocab(self) -> int:
        return int(self.vocab.n_vocab)

    @property
    def busy(self) -> int:
        return self.batcher.busy

    def tokenize(self, texts: list[str], add_special: bool) -> list[list[int]]:
        return [self.vocab.tokenize(t, add_special) for t in texts]

    async def start(
        self,
        prompt: list[int] | str,
        params: SamplingParams,
        prompt_field: str,
        add_special: bool = False,
        want_tokens: bool = False,
    ) -> RequestStream:
        tokens = prompt if isinstance(prompt, list) else self.vocab.tokenize(prompt, add_special)
        room = self.vocab.info.n_ctx_slot - len(tokens)
        cap = room if params.max_tokens is None else min(params.max_tokens, room)
        stream, seq = RequestStream(params), Sequence(tokens, params, max(1, cap))
        seq.id = stream.id
        self.batcher.submit(seq, prompt_field)
        self.sequences[seq.id] = seq
        stream.prompt, stream.prompt_tokens = tokens, len(tokens)
        return stream

    def cancel(self, stream: RequestStream) -> None:
        seq = self.sequences.pop(stream.id, None)
        if seq is not None:
            self.batcher.cancel(seq)

    async def embed(
        self, model: str, inputs: list[list[int]], background: bool = False
    ) -> list[np.ndarray]:
        if not isinstance(self.batcher, Embedder):
            raise BadRequest(f"model '{model}' does not support embeddings", "model")
        job = EmbeddingJob(inputs, background=background)
        self.batcher.submit_embedding(job)
        while not job.complete:
            self.batcher.step()
        return [v for v in job.vectors if v is not None]

    def stats(self) -> dict[str, Any]:
        return {
            "queued": len(self.batcher.waiting),
            "running": len(self.batcher.running),
            "prompt_cache": None,
        }


class FakeLibrary:
    """Every name is a model, except those listed as missing."""

    def __init__(self, missing: tuple[str, ...] = ()) -> None:
        self.missing = set(missing)

    def resolve(self, name: str, allow_path: bool = False) -> ModelRef:
        if name in self.missing:
            raise ModelNotFound(name)
        return ModelRef(name, f"/models/{name}.gguf")


class FakeLoader:
    """Loads models of the sizes it is given (bytes, by name) without running anything.

    `gate` holds every load until a test sets it, so a test can ask while a load is under way.
    `loads` and `unloads` list the names in the order it saw them.
    """

    device = "cpu"

    def __init__(self, sizes: dict[str, int], load_s: float = 0.0) -> None:
        self.sizes = sizes
        self.load_s = load_s
        self.gate = threading.Event()
        self.gate.set()
        self.loads: list[str] = []
        self.unloads: list[str] = []
        self.closed = False
        # Models that split by layer, by name; the rest weigh `sizes` and stay whole.
        self.layered: dict[str, LayeredEstimate] = {}
        self.placements: dict[str, Placement] = {}

    def estimate(self, ref: ModelRef, room: int | None = None, ctx: int = 0) -> LayeredEstimate:
        layered = self.layered.get(ref.name)
        return layered or unsplit(MemoryEstimate(self.sizes.get(ref.name, 100), 0, 0))

    def load(self, ref: ModelRef, placement: Placement) -> ResidentModel:
        self.gate.wait(timeout=10)
        time.sleep(self.load_s)
        self.loads.append(ref.name)
        backend = FakeBackend()
        backend.info = model_info(ref.name)
        runner = LocalRunner(backend, FakeBatcher())  # type: ignore[arg-type]
        model = ResidentModel(backend.info, runner, device=placement.device)
        model.placement = placement
        self.placements[ref.name] = placement
        return model

    def unload(self, model: ResidentModel) -> None:
        self.unloads.append(model.name)
        model.runner.vocab.close()

    def close(self) -> None:
        self.closed = True

    def on_lost(self, callback: Any) -> None:
        self.lost = callback

    def health(self) -> dict[str, Any]:
        return {self.device: {"state": "running"}}


def manager_settings(**overrides: Any) -> Settings:
    """Settings for a manager under test: short waits, so a test of a timeout is quick."""
    base = Settings(keep_alive=None, load_timeout=0.5, max_pass_over=0.1)
    return replace(base, **overrides)


def fake_pool(budget: int) -> MemoryPool:
    return MemoryPool("cpu", budget)


def fake_gpu(budget: int, name: str = "gpu0") -> MemoryPool:
    return MemoryPool(name, budget, kind="gpu", backend_device=name.replace("gpu", "Fake"))


def layers_model(layer: int, n_layers: int = 10, input_weights: int = 0) -> LayeredEstimate:
    """A model of `n_layers` layers of `layer` bytes each (weights), its output one more layer
    of that size, and nothing else: `k` offloaded layers need `k * layer` on the device."""
    return LayeredEstimate(
        input_weights=input_weights,
        output_weights=layer,
        layer_weights=(layer,) * n_layers,
        layer_kv=(0,) * n_layers,
        compute_layer=0,
        compute_logits=0,
        compute_input=0,
        output_buffer=0,
        prompt_cache=0,
    )
