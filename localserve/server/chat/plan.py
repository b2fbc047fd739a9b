"""What a chat request asks of the template and of the answer, the same for both faces: the
tools it offers (server/chat/tool_calls.py), whether a reasoning model thinks, and so how the prompt
is rendered, which grammar constrains the answer and how the answer is split
(server/chat/answer_parser.py)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Any

from localserve.engine.worker_client.resident import ResidentModel
from localserve.formats.call_syntax import syntax_of
from localserve.ground.call_formats import CallFormat, Reasoning
from localserve.ground.errors import BadRequest
from localserve.ground.sampling import SamplingParams
from localserve.server.chat import call_grammar, tool_calls
from localserve.server.chat.answer_parser import THINK, AnswerParser
from localserve.server.chat.template import template_for
from localserve.server.chat.tool_calls import ToolRequest


@dataclass
class ChatPlan:
    model: ResidentModel
    tools: ToolRequest | None
    think: bool | None  # the request's own choice; None: the template's default
    variables: dict[str, Any] = field(default_factory=dict)  # more for the template to read
    thinking_open: bool = False  # the rendered prompt ends in an open reasoning block
    lead: str = ""  # what an answer that calls at once writes first (call_formats.py)

    # Read off the template once per source (formats/call_syntax.py): the model's own syntax.
    @cached_property
    def format(self) -> CallFormat:
        return syntax_of(self.model.info.chat_template)[0]

    @cached_property
    def reasoning(self) -> Reasoning | None:
        return syntax_of(self.model.info.chat_template)[1]

    @property
    def thinks(self) -> bool:
        return self.reasoning is not None

    @property
    def think_close(self) -> str:
        return (self.reasoning or THINK).close

    async def encode(self, messages: list[dict[str, Any]]) -> list[int]:
        """The prompt's tokens (a trip to the worker: for what needs them before the submit,
        Ollama's window and count_tokens)."""
        return await self.model.encode_rendered(await self.rendered(messages))

    async def rendered(self, messages: list[dict[str, Any]]) -> str:
        """`render`, in a thread: Jinja's rendering of a long conversation, with its tools'
        listing, takes as long as the conversation is, and the event loop serves every other
        client meanwhile."""
        return await asyncio.to_thread(self.render, messages)

    def render(self, messages: list[dict[str, Any]]) -> str:
        """The prompt as the model's template writes it, with the tools and the thinking."""
        fmt = self.format
        messages = tool_calls.history(messages, fmt)
        variables = dict(self.variables)
        if self.tools is not None:
            if fmt.native:
                variables["tools"] = [f.as_tool() for f in self.tools.functions]
                if not fmt.lists_tools:
                    messages = tool_calls.with_tools_listed(messages, self.tools, fmt)
            else:
                messages = tool_calls.with_generic_prompt(messages, self.tools)
        if self.think is not None:
            variables["enable_thinking"] = self.think
        text = template_for(self.model).render(messages, add_generation_prompt=True, **variables)
        end = text.rstrip()
        reasoning = self.reasoning
        self.thinking_open = reasoning is not None and end.endswith(reasoning.open)
        closed = reasoning is not None and end.endswith(reasoning.close)
        self.lead = "" if closed else (fmt.lead_open if self.thinking_open else fmt.lead_fresh)
        return text

    async def constrained(self, params: SamplingParams) -> SamplingParams:
        """`constrain`, in a thread where there are tools: the grammar of hundreds of tools
        takes milliseconds to write. After the rendering, whose end decides its `lead`."""
        if self.tools is None:
            return self.constrain(params)
        return await asyncio.to_thread(self.constrain, params)

    def constrain(self, params: SamplingParams) -> SamplingParams:
        """The sampling params with the tool calls' grammar, when tools may be called."""
        if self.tools is None:
            return params
        if params.grammar is not None:
            raise BadRequest(
                f"'{params.grammar.field}' cannot be combined with 'tools'", params.grammar.field
            )
        tools = self.tools
        functions = [(f.name, f.parameters) for f in tools.offered]
        # A function named in tool_choice is called once, as OpenAI's API does.
        parallel = tools.parallel and tools.choice != "function"
        rule = call_grammar.grammar(functions, tools.choice, parallel, self.format, self.lead)
        return replace(params, grammar=rule)

    def parser(self) -> AnswerParser:
        tools = self.tools
        offered = [(f.name, f.parameters) for f in tools.offered] if tools is not None else []
        return AnswerParser(
            self.format if tools is not None else None,
            self.reasoning,
            self.thinking_open,
            call_grammar.text_params(offered),
        )


# Names the template reads from us; chat_template_kwargs may not replace them.
_OURS = frozenset({"messages", "tools", "add_generation_prompt", "bos_token", "eos_token"})


def template_kwargs(body: dict[str, Any]) -> dict[str, Any]:
    """llama.cpp's `chat_template_kwargs`: more variables for the model's template, such as
    Qwen's `enable_thinking`."""
    kwargs = body.get("chat_template_kwargs")
    if kwargs is None:
        return {}
    if not isinstance(kwargs, dict):
        raise BadRequest("'chat_template_kwargs' must be an object", "chat_template_kwargs")
    taken = sorted(_OURS & kwargs.keys())
    if taken:
        raise BadRequest(
            f"'chat_template_kwargs' may not set {', '.join(taken)}", "chat_template_kwargs"
        )
    return kwargs


# OpenAI's reasoning efforts: Chat Completions' `reasoning_effort`, Responses' `reasoning.effort`.
EFFORTS = ("none", "minimal", "low", "medium", "high", "xhigh")


def read_effort(value: Any, name: str, field: str) -> str | None:
    """A reasoning effort, one of EFFORTS; None when not given. Its one switch here is the
    template's thinking: "none" turns it off, and any other level on (as Ollama takes its
    `think` levels): no template here grades how long a model thinks."""
    if value is None:
        return None
    if value not in EFFORTS:
        raise BadRequest(f"'{name}' must be one of {', '.join(EFFORTS)}", field)
    return str(value)


def plan_chat(
    model: ResidentModel,
    tools: ToolRequest | None,
    think: bool | None,
    variables: dict[str, Any] | None = None,
    think_field: str = "think",
) -> ChatPlan:
    """BadRequest naming `think_field` for thinking asked of a model that does not think.
    `variables` may hold `enable_thinking`, which is `think` by another name."""
    variables = dict(variables or {})
    if think is None and isinstance(variables.get("enable_thinking"), bool):
        think = variables.pop("enable_thinking")
    plan = ChatPlan(model, tools, think, variables)
    if think and not plan.thinks:
        raise BadRequest(f"'{model.name}' does not support thinking", think_field)
    return plan
