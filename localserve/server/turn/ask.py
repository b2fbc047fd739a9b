"""What a face asks of a turn (`Ask`), decoded from its body, and what it writes its answer
from (`Answering`): a local model's turn or an upstream's answer, read the same way."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from localserve.engine.worker_client.resident import ResidentModel
from localserve.ground.pin import Pin
from localserve.ground.sampling import SamplingParams
from localserve.ground.units import UNSET, KeepAlive
from localserve.server.chat.answer_parser import Call, Parsed
from localserve.server.chat.pieces import join
from localserve.server.chat.plan import ChatPlan
from localserve.server.chat.tool_calls import ToolRequest

# A face's own prompt, for what the chat template does not write (a raw completion, a fill in
# the middle, Ollama's window): the prompt's tokens or text, and the sampling it leaves room for.
Prompt = Callable[
    [ResidentModel, ChatPlan, SamplingParams], Awaitable[tuple[list[int] | str, SamplingParams]]
]


@dataclass
class Ask:
    """What a request asks, read from any face's body.

    `think` is the request's own choice (None: the template's default), refused in
    `think_field`'s name by a model that does not think; `think_if_able` asks a model that
    thinks to think, and leaves one that does not to answer directly (Responses'
    `reasoning.effort`, Anthropic's `adaptive`). Without `prompt`, the messages go through the
    model's chat template; with `templated` False the answer is read as plain text (no thinking,
    no calls), as a raw prompt's is.
    """

    model: str
    messages: list[dict[str, Any]]
    params: SamplingParams
    tools: ToolRequest | None = None
    think: bool | None = None
    think_field: str = "think"
    think_if_able: bool = False
    keep_alive: KeepAlive = UNSET
    pin: Pin = Pin()
    variables: dict[str, Any] = field(default_factory=dict)
    thinking_budget: int | None = None  # tokens the thinking may take
    prompt: Prompt | None = None
    prompt_field: str = "messages"  # the field a prompt too long for a slot is blamed on
    templated: bool = True


class Answering(Protocol):
    """What the faces write an answer from: a local `Turn` (turn/local.py), or an upstream
    model's answer (server/upstream/agents.py). The counts are final once `pieces` has ended."""

    @property
    def model_name(self) -> str: ...
    @property
    def prompt_tokens(self) -> int: ...
    @property
    def cached_tokens(self) -> int: ...
    @property
    def completion_tokens(self) -> int: ...
    @property
    def finish_reason(self) -> str | None: ...
    @property
    def stop_sequence(self) -> str | None: ...
    @property
    def calls(self) -> list[Call]: ...

    def pieces(self, idle_s: float | None = None) -> AsyncIterator[Parsed | None]:
        """The answer's parsed pieces, the last one once it is over; None each time `idle_s`
        passes with nothing new. Raises EngineError for an answer that failed."""
        ...


async def whole(turn: Answering) -> Parsed:
    """The whole answer, once the turn is over."""
    answer = Parsed()
    async for piece in turn.pieces():
        if piece is not None:
            answer = join(answer, piece)
    return answer
