"""A model that is loaded and servable: its backend, its batcher and its chat template."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from localserve.backends.base import Backend, ModelInfo
from localserve.engine.chat_template import ChatTemplate
from localserve.engine.errors import BadRequest
from localserve.engine.estimate import MemoryEstimate
from localserve.engine.sampling import SamplingParams
from localserve.engine.batcher import Batcher
from localserve.engine.sequence import Sequence


class ResidentModel:
    """What a request talks to once the manager has handed it a model."""

    def __init__(self, backend: Backend, scheduler: Batcher, device: str) -> None:
        self.backend = backend
        self.scheduler = scheduler
        self.device = device
        self.info: ModelInfo = backend.info
        self.loaded_at = time.time()
        # Residency bookkeeping, owned by the ModelManager on the event loop.
        self.in_flight = 0
        self.pinned = False
        self.draining = False
        self.keep_alive_s: float | None = None
        self.expires_at: float | None = None
        self.last_used = time.monotonic()
        self.load_seconds = 0.0
        self.estimate: MemoryEstimate | None = None
        self.actual_bytes = 0
        self.rss_delta = 0
        self.template = ChatTemplate(
            self.info.chat_template, self.info.bos_text, self.info.eos_text, self.info.architecture
        )

    @property
    def name(self) -> str:
        return self.info.name

    @property
    def idle(self) -> bool:
        """No request holds it and its batcher has nothing running or waiting."""
        return self.in_flight == 0 and self.scheduler.busy == 0

    def render_chat(self, messages: list[dict[str, Any]]) -> str:
        return self.template.render(messages, add_generation_prompt=True)

    async def encode_chat(self, messages: list[dict[str, Any]]) -> list[int]:
        text = self.render_chat(messages)
        # The template already wrote any BOS it wants; only add one if it did not.
        add_special = self.info.add_bos and not (
            self.info.bos_text and text.startswith(self.info.bos_text)
        )
        return await self._tokenize(text, add_special)

    async def encode_text(self, text: str) -> list[int]:
        return await self._tokenize(text, True)

    def check_token_ids(self, tokens: list[int], field: str = "prompt") -> list[int]:
        """Token ids a client sent: an out-of-range id would fail the whole batch it runs in."""
        n_vocab = self.backend.n_vocab
        bad = next((t for t in tokens if not 0 <= t < n_vocab), None)
        if bad is not None:
            raise BadRequest(
                f"token id {bad} is outside this model's vocabulary (0..{n_vocab - 1})", field
            )
        return tokens

    async def _tokenize(self, text: str, add_special: bool) -> list[int]:
        # Long prompts take milliseconds to tokenize: keep that off the event loop.
        loop = asyncio.get_running_loop()
        tokens = await loop.run_in_executor(None, self.backend.tokenize, text, add_special)
        if not tokens:
            raise BadRequest("the prompt is empty", "prompt")
        return tokens

    def submit(
        self, prompt: list[int], params: SamplingParams, prompt_field: str = "prompt"
    ) -> Sequence:
        """Queue a generation; raises ContextOverflow or QueueFull at once.

        `prompt_field` names the request field an error about the prompt should point at.
        """
        room = self.info.n_ctx_slot - len(prompt)
        limit = room if params.max_tokens is None else min(params.max_tokens, room)
        seq = Sequence(prompt, params, max(1, limit), asyncio.get_running_loop())
        self.scheduler.submit(seq, prompt_field)
        return seq

    def cancel(self, seq: Sequence) -> None:
        self.scheduler.cancel(seq)
