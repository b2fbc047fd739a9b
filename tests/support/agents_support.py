"""Fixtures of the agent faces' tests: the official `anthropic` and `openai` clients against the
shared SmolLM2 daemon, a Gemma 3 270M daemon, and the tools-and-thinking test model
(tools_support.py); and the tools both faces' tests offer.

Import the fixtures into a test module (`from agents_support import gemma, ...`).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import anthropic
import openai
import pytest

from tests.support.live import CLIENT_TIMEOUT_S, running_daemon
from tests.support.residency_support import GEMMA, gemma_file

WEATHER = {
    "type": "object",
    "properties": {"city": {"type": "string", "maxLength": 30}, "unit": {"enum": ["c", "f"]}},
    "required": ["city"],
}
TIME = {
    "type": "object",
    "properties": {"zone": {"type": "string", "maxLength": 20}},
    "required": ["zone"],
}
SCHEMAS = {"get_weather": WEATHER, "get_time": TIME}
DESCRIPTIONS = {"get_weather": "The weather in a city", "get_time": "The time in a zone"}
ANTHROPIC_TOOLS = [
    {"name": n, "description": DESCRIPTIONS[n], "input_schema": s} for n, s in SCHEMAS.items()
]
RESPONSES_TOOLS = [
    {"type": "function", "name": n, "description": DESCRIPTIONS[n], "parameters": s}
    for n, s in SCHEMAS.items()
]
ASK_WEATHER = "What is the weather in Paris?"
# Greedy SmolLM2 copies this line; on the tools template, writing the trigger starts a call.
COPY_TRIGGER = "Write this exactly: <tool_call>"


@dataclass(frozen=True)
class Served:
    """One daemon's model, with both agent clients pointed at it."""

    url: str
    model: str
    anthropic: anthropic.Anthropic
    openai: openai.OpenAI


def served(url: str, model: str) -> Served:
    return Served(
        url,
        model,
        anthropic.Anthropic(base_url=url, api_key="none", timeout=CLIENT_TIMEOUT_S, max_retries=0),
        openai.OpenAI(
            base_url=f"{url}/v1", api_key="none", timeout=CLIENT_TIMEOUT_S, max_retries=0
        ),
    )


@pytest.fixture(scope="session")
def smol(daemon_url: str) -> Served:
    return served(daemon_url, "smollm2")


@pytest.fixture(scope="session")
def gemma() -> Iterator[Served]:
    with running_daemon(["--model", gemma_file(), "--parallel", "4", "--ctx", "2048"]) as (_, url):
        yield served(url, GEMMA)


@pytest.fixture(scope="session")
def thinker(tools_daemon) -> Served:
    """The test copy of SmolLM2 whose template takes tools and thinks when asked."""
    from tests.support.tools_support import TOOLS_MODEL

    return served(tools_daemon[1], TOOLS_MODEL)


@pytest.fixture(params=["smollm2", "gemma3"])
def both(request) -> Served:
    """Each test with this fixture runs on SmolLM2 and on Gemma 3."""
    return request.getfixturevalue("smol" if request.param == "smollm2" else "gemma")
