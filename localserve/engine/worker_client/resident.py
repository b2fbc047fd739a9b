"""A model that is loaded and servable: its facts, the manager's bookkeeping of it, and the
runner it tokenizes, generates and embeds on (engine/worker_client/runner.py). Its chat template
is rendered where the rest of a chat's prompt is written (server/chat/template.py)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import replace

import numpy as np

from localserve.engine.worker_client.placement import Placement
from localserve.engine.worker_client.runner import Runner
from localserve.engine.worker_client.stream import RequestStream
from localserve.ground.errors import BadRequest, ContextOverflow
from localserve.ground.model import ModelInfo
from localserve.ground.sampling import SamplingParams
from localserve.ground.token_floor import check_fits


class ResidentModel:
    """What a request talks to once the manager has handed it a model."""

    def __init__(self, info: ModelInfo, runner: Runner, device: str) -> None:
        self.info = info
        self.runner = runner
        self.device = device
        self.loaded_at = time.time()
        # Residency bookkeeping, owned by the ModelManager on the event loop.
        self.in_flight = 0
        self.pinned = False
        self.draining = False
        self.keep_alive_s: float | None = None
        # The settings' max_tokens for this model: the cap of a request that sets none.
        self.default_max_tokens: int | None = None
        self.expires_at: float | None = None
        self.last_used = time.monotonic()
        self.load_seconds = 0.0
        # Where it runs and what it reserved in each pool; the manager sets it at the load.
        self.placement = Placement(device, 0)
        self.actual_bytes = 0
        self.buffers: dict[str, int] = {}  # the runtime's own, by name (llama.cpp's)
        self.rss_delta = 0
        self.draft_model: str | None = None  # the model drafting its tokens (--draft-model)

    @property
    def name(self) -> str:
        return self.info.name

    @property
    def idle(self) -> bool:
        """No request holds it and its batcher has nothing running or waiting."""
        return self.in_flight == 0 and self.runner.busy == 0

    async def encode_rendered(self, text: str) -> list[int]:
        """A prompt the chat template wrote, tokenized."""
        return await self._tokenize(text, self.add_bos(text))

    async def encode_text(self, text: str) -> list[int]:
        return await self._tokenize(text, True)

    async def encode_prompt(
        self, text: str, field: str = "prompt", add_special: bool = True
    ) -> list[int]:
        """A prompt's text tokenized, or ContextOverflow where it cannot fit a slot with its first
        new token, as the worker's submit refuses it: before any of it is tokenized where its
        floor is past the slot (ground/token_floor.py). A face that cuts a prompt to a window,
        as Ollama's do, reads it whole with encode_text instead."""
        n_ctx = self.info.n_ctx_slot

        def tokenize() -> list[int]:
            # In the thread: the floor reads the text's bytes once, milliseconds for 16 MiB.
            check_fits(self.info.token_floor, text, n_ctx, 1, field)
            (tokens,) = self.runner.tokenize([text], add_special)
            if len(tokens) + 1 > n_ctx:
                raise ContextOverflow(len(tokens), n_ctx, field)
            return tokens

        return await asyncio.get_running_loop().run_in_executor(None, tokenize)

    def may_overflow(self, text: str) -> bool:
        """Whether `text` may be too long for a slot, told without reading it: up to 4 bytes a
        character, and about a token a byte at most (and a BOS and EOS). Only what is counted
        first rests on it: a text this misjudges is still refused when it is queued."""
        return 4 * len(text) + 3 > self.info.n_ctx_slot

    async def encode_piece(self, text: str) -> list[int]:
        """Text that goes after other tokens: no BOS."""
        return await self._tokenize(text, False)

    async def encode_texts(
        self, texts: list[str], field: str = "input", within: int | None = None
    ) -> list[list[int]]:
        """Many texts in one trip to a worker thread, as an embeddings request sends them.
        `within`: ContextOverflow, before any is tokenized, for a text whose floor is past that
        many tokens (a face that refuses an input longer than the context, not one that cuts)."""

        def tokenize() -> list[list[int]]:
            if within is not None:
                for text in texts:
                    check_fits(self.info.token_floor, text, within, 0, field)
            return self.runner.tokenize(texts, True)

        tokens = await asyncio.get_running_loop().run_in_executor(None, tokenize)
        empty = next((i for i, t in enumerate(tokens) if not t), None)
        if empty is not None:
            raise BadRequest(f"input {empty} is empty", field)
        return tokens

    async def count_tokens(self, texts: list[str]) -> list[int]:
        """How many tokens each text is, in one trip, for sizing (Ollama's window): no BOS,
        and an empty one is 0, not refused."""
        loop = asyncio.get_running_loop()
        tokens = await loop.run_in_executor(None, self.runner.tokenize, texts, False)
        return [len(t) for t in tokens]

    def check_token_ids(self, tokens: list[int], field: str = "prompt") -> list[int]:
        """Token ids a client sent: an out-of-range id would fail the whole batch it runs in."""
        n_vocab = self.runner.n_vocab
        bad = next((t for t in tokens if not 0 <= t < n_vocab), None)
        if bad is not None:
            raise BadRequest(
                f"token id {bad} is outside this model's vocabulary (0..{n_vocab - 1})", field
            )
        return tokens

    async def _tokenize(self, text: str, add_special: bool) -> list[int]:
        # Long prompts take milliseconds to tokenize: keep that off the event loop.
        loop = asyncio.get_running_loop()
        (tokens,) = await loop.run_in_executor(None, self.runner.tokenize, [text], add_special)
        return tokens

    def with_cap(self, params: SamplingParams) -> SamplingParams:
        """The answer's cap settled: the request's own max_tokens, else the settings' for this
        model (the worker then keeps it within the room the prompt leaves)."""
        if params.max_tokens is not None or self.default_max_tokens is None:
            return params
        return replace(params, max_tokens=self.default_max_tokens)

    def add_bos(self, rendered: str) -> bool:
        """Whether a prompt the chat template wrote still wants the model's BOS: the template
        writes any BOS it wants, so only one that did not gets it."""
        return self.info.add_bos and not (
            self.info.bos_text and rendered.startswith(self.info.bos_text)
        )

    async def submit(
        self,
        prompt: list[int] | str,
        params: SamplingParams,
        prompt_field: str = "prompt",
        want_tokens: bool = False,
    ) -> RequestStream:
        """Queue a generation of tokens, or of a rendered prompt's text (one round trip: the
        worker tokenizes it); raises ContextOverflow or QueueFull before anything streams.

        `prompt_field` names the request field an error about the prompt should point at.
        """
        add_special = isinstance(prompt, str) and self.add_bos(prompt)
        return await self.runner.start(prompt, params, prompt_field, add_special, want_tokens)

    @asynccontextmanager
    async def generation(
        self,
        prompt: list[int] | str,
        params: SamplingParams,
        prompt_field: str = "prompt",
        want_tokens: bool = False,
    ) -> AsyncIterator[RequestStream]:
        """A queued generation that is cancelled, freeing its slot, however the caller leaves."""
        stream = await self.submit(prompt, params, prompt_field, want_tokens)
        try:
            yield stream
        finally:
            if not stream.finished:
                self.runner.cancel(stream)

    async def embed(self, inputs: list[list[int]], background: bool = False) -> list[np.ndarray]:
        """One raw (unnormalized) vector per input, pooled the model's way.

        The inputs run in the model's batcher, sharing decode calls with other requests.
        """
        return await self.runner.embed(self.name, inputs, background)
