"""The model families localserve is asked to serve, each through its own chat template: a call
forced by `tool_choice` comes back as a call (OpenAI Chat Completions and Anthropic Messages),
a streamed answer after a call and its result renders through the template and leaks no call
markup, and pydantic-ai gets structured output through a forced call.

The families are Qwen3-Coder, Qwen3.5, gpt-oss, GLM-4.6, DeepSeek V3.1, Kimi K2, MiniMax M2,
Devstral, Llama 3.1, Granite 4.0 and Gemma 4 (template_corpus.FAMILIES). Their weights are far
too large for the suite, so each is served as a copy of SmolLM2-135M's GGUF carrying the
family's real `chat_template` (gguf_copy.copy_with). The weights are not the family's, but
everything these tests specify is localserve's and the template's: the prompt the template
renders (the history of a call and its result included), the call syntax read off the template
(call_syntax.syntax_of), the grammar that forces a call in that syntax, and the parser that
reads it back, whole or streamed. A forced call is therefore the grammar's, not SmolLM2's; in
`auto` after a tool result SmolLM2 writes whatever it likes (often copying prompt markup), and
only what the parser must make of it is checked.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from functools import cache
from typing import Any

import anthropic
import openai
import pytest
from pydantic import BaseModel

from localserve.formats.call_syntax import syntax_of
from tests.support.live import CLIENT_TIMEOUT_S
from tests.support.real_templates import serving_copies
from tests.support.template_corpus import FAMILIES, template

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The weather of a city for the next days.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
            "required": ["city"],
        },
    },
}
ASK = [{"role": "user", "content": "What is the weather in Paris?"}]
CALL_ID = "qZ7xW3kP9"  # nine alphanumerics, as Mistral's templates insist
HISTORY = [
    *ASK,
    {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {
                "id": CALL_ID,
                "type": "function",
                "function": {"name": "get_weather", "arguments": json.dumps({"city": "Paris"})},
            }
        ],
    },
    {"role": "tool", "tool_call_id": CALL_ID, "content": "Sunny, 21 C"},
]
FINISHES = ("stop", "length", "tool_calls")

family = pytest.mark.parametrize("name", list(FAMILIES), ids=list(FAMILIES))


def served(name: str) -> str:
    return f"smollm2-{name}"


@cache
def trigger(name: str) -> str:
    """Where a call starts in a free answer, in the format read off `name`'s template."""
    return syntax_of(template(name))[0].trigger


def markup(name: str) -> tuple[str, ...]:
    """Texts that, in an answer's content or reasoning, mean a call leaked out of the parser."""
    return (trigger(name), "get_weather", "<tool_call", "[TOOL_CALLS]")


def leaked(text: str | None, needles: tuple[str, ...]) -> list[str]:
    return [n for n in needles if n in (text or "")]


@pytest.fixture(scope="module")
def families_daemon(tmp_path_factory) -> Iterator[tuple[subprocess.Popen, str]]:
    """One daemon serving a copy of SmolLM2 per family, each with its family's template."""
    templates = {served(name): template(name) for name in FAMILIES}
    folder = tmp_path_factory.mktemp("families")
    with serving_copies(folder, templates, ["--parallel", "1", "--ctx", "4096"]) as daemon:
        yield daemon


@pytest.fixture(scope="module")
def client(families_daemon) -> Iterator[openai.OpenAI]:
    c = openai.OpenAI(
        base_url=f"{families_daemon[1]}/v1",
        api_key="none",
        timeout=CLIENT_TIMEOUT_S,
        max_retries=0,
    )
    yield c
    c.close()


@pytest.fixture(scope="module")
def claude(families_daemon) -> Iterator[anthropic.Anthropic]:
    c = anthropic.Anthropic(
        base_url=families_daemon[1], api_key="none", timeout=CLIENT_TIMEOUT_S, max_retries=0
    )
    yield c
    c.close()


@family
def test_a_forced_call_comes_back_as_one_parsed_call(client: openai.OpenAI, name: str) -> None:
    answer = client.chat.completions.create(
        model=served(name),
        messages=ASK,
        tools=[WEATHER],
        tool_choice={"type": "function", "function": {"name": "get_weather"}},
        temperature=0,
        max_tokens=200,
    )
    choice = answer.choices[0]
    message = choice.message
    seen = f"{choice.finish_reason=} {message=}"
    assert choice.finish_reason == "tool_calls", seen
    assert [c.function.name for c in message.tool_calls or []] == ["get_weather"], seen
    arguments = json.loads(message.tool_calls[0].function.arguments)
    assert isinstance(arguments, dict) and isinstance(arguments.get("city"), str), seen
    reasoning = getattr(message, "reasoning_content", None)
    assert leaked(message.content, markup(name)) == [], seen
    assert leaked(reasoning, markup(name)) == [], seen


@family
def test_a_streamed_answer_after_a_tool_result_leaks_no_call_markup(
    client: openai.OpenAI, name: str
) -> None:
    stream = client.chat.completions.create(
        model=served(name),
        messages=HISTORY,
        tools=[WEATHER],
        temperature=0,
        max_tokens=60,
        stream=True,
    )
    content, reasoning, finish = "", "", None
    calls: dict[int, dict[str, str]] = {}
    for chunk in stream:
        if not chunk.choices:
            continue
        choice = chunk.choices[0]
        delta = choice.delta
        content += delta.content or ""
        reasoning += getattr(delta, "reasoning_content", None) or ""
        for part in delta.tool_calls or []:
            call = calls.setdefault(part.index, {"name": "", "arguments": ""})
            if part.function is not None:
                call["name"] += part.function.name or ""
                call["arguments"] += part.function.arguments or ""
        finish = choice.finish_reason or finish
    seen = f"{finish=} {content=} {reasoning=} {calls=}"
    assert finish in FINISHES, seen
    for call in calls.values():
        assert call["name"], seen
        assert isinstance(json.loads(call["arguments"]), dict), seen
    assert leaked(content, (trigger(name),)) == [], seen
    assert leaked(reasoning, (trigger(name),)) == [], seen


@family
def test_anthropic_messages_with_a_named_tool_answer_a_tool_use(
    claude: anthropic.Anthropic, name: str
) -> None:
    message = claude.messages.create(
        model=served(name),
        messages=ASK,
        tools=[
            {
                "name": "get_weather",
                "description": WEATHER["function"]["description"],
                "input_schema": WEATHER["function"]["parameters"],
            }
        ],
        tool_choice={"type": "tool", "name": "get_weather"},
        max_tokens=200,
        extra_body={"temperature": 0},  # the 2026 SDK no longer names the sampling fields
    )
    seen = f"{message.stop_reason=} {message.content=}"
    assert message.stop_reason == "tool_use", seen
    uses = [b for b in message.content if b.type == "tool_use"]
    assert [u.name for u in uses] == ["get_weather"], seen
    assert isinstance(uses[0].input, dict) and "city" in uses[0].input, seen
    texts = [getattr(b, "text", None) or getattr(b, "thinking", None) for b in message.content]
    assert [t for t in texts if t and trigger(name) in t] == [], seen


class City(BaseModel):
    name: str


def test_pydantic_ai_gets_structured_output_through_a_forced_call(families_daemon) -> None:
    """pydantic-ai asks for its output as a forced call to its own `final_result` tool; on
    Qwen3.5's template that call is written in Qwen3.5's XML-like parameter syntax and must come
    back as JSON arguments pydantic can validate."""
    from pydantic_ai import Agent
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider

    provider = OpenAIProvider(base_url=f"{families_daemon[1]}/v1", api_key="none")
    agent = Agent(OpenAIChatModel(served("qwen3.5"), provider=provider), output_type=City)
    settings: Any = {"temperature": 0, "max_tokens": 200}
    result = agent.run_sync("Name a city in France.", model_settings=settings)
    assert isinstance(result.output, City)
