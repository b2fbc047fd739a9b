"""Agents' client libraries, unmodified, against a daemon with default settings but its model
(#44): the `llm` CLI through its Ollama plugin (llm-ollama), and pydantic-ai's Agent with
structured output through its Ollama, OpenAI Responses and Anthropic models. A 135M model's
answers are not judged; what is tested is that each round trip completes with the output its
caller asked for (a pydantic model, validated by pydantic-ai itself)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from pydantic import BaseModel

from tests.support.helpers import MODEL
from tests.support.live import running_daemon


class City(BaseModel):
    name: str
    country: str


ASK = "Name a city in France."


@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    with running_daemon(["--model", MODEL]) as (_, u):
        yield u


def test_llm_with_llm_ollama_answers_through_the_ollama_face(url: str, tmp_path: Path) -> None:
    env = {**os.environ, "OLLAMA_HOST": url, "LLM_USER_PATH": str(tmp_path)}
    llm = Path(sys.executable).parent / "llm"
    listed = subprocess.run(
        [str(llm), "models", "list"], env=env, capture_output=True, text=True, timeout=120
    )
    assert f"Ollama: ollama/{MODEL}:latest" in listed.stdout, listed.stdout + listed.stderr
    done = subprocess.run(
        [str(llm), "-m", f"ollama/{MODEL}", "-o", "num_predict", "8", "Say hi."],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0 and done.stdout.strip(), done.stderr


def run_agent(model: object) -> City:
    from pydantic_ai import Agent

    agent = Agent(model, output_type=City)
    result = agent.run_sync(ASK, model_settings={"temperature": 0, "max_tokens": 60})
    return result.output


def test_pydantic_ai_gets_structured_output_through_its_ollama_model(url: str) -> None:
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.ollama import OllamaProvider

    model = OpenAIChatModel(MODEL, provider=OllamaProvider(base_url=f"{url}/v1"))
    assert isinstance(run_agent(model), City)


def test_pydantic_ai_gets_structured_output_through_its_openai_responses_model(url: str) -> None:
    from pydantic_ai.models.openai import OpenAIResponsesModel
    from pydantic_ai.providers.openai import OpenAIProvider

    provider = OpenAIProvider(base_url=f"{url}/v1", api_key="local")
    assert isinstance(run_agent(OpenAIResponsesModel(MODEL, provider=provider)), City)


def test_pydantic_ai_gets_structured_output_through_its_anthropic_model(url: str) -> None:
    from pydantic_ai.models.anthropic import AnthropicModel
    from pydantic_ai.providers.anthropic import AnthropicProvider

    provider = AnthropicProvider(base_url=url, api_key="local")
    assert isinstance(run_agent(AnthropicModel(MODEL, provider=provider)), City)
