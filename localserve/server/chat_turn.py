"""One chat turn as the agent faces (Anthropic's Messages, OpenAI's Responses) run it: a request
read into the same parts (`ChatAsk`), the model held, the prompt rendered and queued, and the
answer's parsed pieces read as they stream.

The faces differ only in how they read the request and write the answer; everything between is
here, once: the prompt goes through the model's template (server/chat_plan.py), the tools'
grammar constrains the answer, and the pieces are split into thinking, text and calls
(server/answer_parser.py).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from localserve.engine.resident import ResidentModel
from localserve.engine.sequence import Sequence
from localserve.ground.errors import BadRequest, EngineError
from localserve.ground.sampling import SamplingParams
from localserve.ground.units import UNSET, KeepAlive
from localserve.server import request_log
from localserve.server.answer_parser import AnswerParser, Parsed
from localserve.server.chat_plan import ChatPlan, plan_chat
from localserve.server.state import MANAGER
from localserve.server.tool_calls import ToolRequest


@dataclass
class ChatAsk:
    """What a chat request asks, read from any face's body.

    `think` is the request's own choice (None: the template's default); `think_if_able` asks a
    model that thinks to think, and leaves one that does not to answer directly (Responses'
    `reasoning.effort`, Anthropic's `adaptive`), where `think=True` refuses such a model.
    """

    model: str
    messages: list[dict[str, Any]]
    params: SamplingParams
    tools: ToolRequest | None = None
    think: bool | None = None
    think_if_able: bool = False
    keep_alive: KeepAlive = UNSET
    variables: dict[str, Any] = field(default_factory=dict)


@dataclass
class Turn:
    model: ResidentModel
    seq: Sequence
    parser: AnswerParser


def check_room(model: ResidentModel, params: SamplingParams) -> None:
    """What needs the model to check: logit_bias ids in its vocabulary, and a max_tokens no
    slot could ever give (one larger than the prompt leaves is capped, finish_reason "length",
    as llama.cpp's server does: clients send their own large defaults)."""
    model.check_token_ids([t for t, _ in params.logit_bias], "logit_bias")
    if params.max_tokens is not None and params.max_tokens > model.info.n_ctx_slot:
        raise BadRequest(
            f"max_tokens {params.max_tokens} is larger than this model's context per slot "
            f"({model.info.n_ctx_slot} tokens)", "max_tokens",
        )


def plan_for(model: ResidentModel, ask: ChatAsk) -> ChatPlan:
    plan = plan_chat(model, ask.tools, ask.think, ask.variables)
    if ask.think_if_able and plan.think is None and plan.thinks:
        plan.think = True
    return plan


async def prompt_tokens(request: web.Request, ask: ChatAsk) -> int:
    """How many tokens the rendered prompt of `ask` has (Anthropic's count_tokens)."""
    async with request.app[MANAGER].acquire(ask.model, ask.keep_alive) as model:
        return len(await plan_for(model, ask).encode(ask.messages))


@asynccontextmanager
async def chat_turn(request: web.Request, ask: ChatAsk) -> AsyncIterator[Turn]:
    """The model held and the turn queued; the sequence is cancelled however the caller leaves.
    Raises before anything streams for what can never run (an unknown model, a prompt longer
    than a slot, a full queue)."""
    async with request.app[MANAGER].acquire(ask.model, ask.keep_alive) as model:
        check_room(model, ask.params)
        plan = plan_for(model, ask)
        tokens = await plan.encode(ask.messages)
        params = plan.constrain(ask.params)
        async with request_log.generation(request, model, tokens, params, "messages") as seq:
            yield Turn(model, seq, plan.parser())


async def pieces(turn: Turn, idle_s: float | None = None) -> AsyncIterator[Parsed | None]:
    """The answer's parsed pieces as they stream, the last one once the sequence finishes;
    None each time `idle_s` passes with nothing new (a stream's keep-alive). Raises EngineError
    for a sequence that failed."""
    queue = turn.seq.outputs
    while True:
        try:
            delta = await asyncio.wait_for(queue.get(), idle_s) if idle_s else await queue.get()
        except asyncio.TimeoutError:
            yield None
            continue
        if delta.error:
            raise EngineError(delta.error)
        finished = delta.finish_reason is not None
        yield turn.parser.feed(delta.text, final=finished)
        if finished:
            return


async def whole_answer(turn: Turn) -> Parsed:
    """The whole answer, once it is done."""
    answer = Parsed()
    async for piece in pieces(turn):
        if piece is not None:
            answer = Parsed(answer.content + piece.content, answer.thinking + piece.thinking,
                            answer.calls + piece.calls)  # fmt: skip
    return answer

