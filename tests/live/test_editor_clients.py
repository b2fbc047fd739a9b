"""The client libraries editor tools are built on, unmodified, against a live daemon: litellm
(Aider, on both faces: `openai/` and `ollama_chat/`), langchain-openai and langchain-ollama
(tool binding and structured output)."""

from __future__ import annotations

import json
import os
from typing import Literal

import jsonschema
from pydantic import BaseModel, Field

from tests.support.helpers import MODEL
from tests.support.tools_support import TOOLS_MODEL, tools_daemon  # noqa: F401  (fixture)

# litellm fetches its price list from GitHub at import unless told to use its own copy.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

WEATHER = {
    "type": "object",
    "properties": {"city": {"type": "string", "maxLength": 30}},
    "required": ["city"],
}
TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The weather in a city",
        "parameters": WEATHER,
    },
}
ASK = [{"role": "user", "content": "What is the weather in Paris?"}]
COPY_TRIGGER = "Write this exactly: <tool_call>"
# In auto mode a call is the model's choice, and SmolLM2's choice on COPY_TRIGGER alone is a
# near-tie that a cached prompt or a busy step tips either way. After a turn that answered the
# same words with a call, it calls again in every one of those states.
CALL_AGAIN = [
    {"role": "user", "content": COPY_TRIGGER},
    {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
            }
        ],
    },
    {"role": "tool", "tool_call_id": "call_1", "content": "sunny"},
    {"role": "assistant", "content": "It is sunny."},
    {"role": "user", "content": COPY_TRIGGER},
]


class City(BaseModel):
    name: str = Field(max_length=20)
    country: str = Field(max_length=20)
    size: Literal["small", "big"]


def get_weather(city: str) -> str:
    """The weather in a city."""
    return "sunny"


# -- litellm -------------------------------------------------------------------------------------


def test_litellm_openai_forced_tool_call(daemon_url) -> None:
    import litellm

    answer = litellm.completion(
        model=f"openai/{MODEL}",
        api_base=f"{daemon_url}/v1",
        api_key="none",
        messages=ASK,
        tools=[TOOL],
        tool_choice="required",
        temperature=0,
        max_tokens=80,
    )
    call = answer.choices[0].message.tool_calls[0]
    assert call.function.name == "get_weather"
    jsonschema.validate(json.loads(call.function.arguments), WEATHER)


def test_litellm_ollama_chat_tool_call(tools_daemon) -> None:
    # Ollama has no tool_choice (litellm drops it): the model calls in auto mode.
    import litellm

    answer = litellm.completion(
        model=f"ollama_chat/{TOOLS_MODEL}",
        api_base=tools_daemon[1],
        messages=CALL_AGAIN,
        tools=[TOOL],
        temperature=0,
        max_tokens=80,
        repeat_penalty=1.0,
    )
    call = answer.choices[0].message.tool_calls[0]
    assert call.function.name == "get_weather"
    jsonschema.validate(json.loads(call.function.arguments), WEATHER)


def test_litellm_json_schema_response_format(daemon_url) -> None:
    import litellm

    answer = litellm.completion(
        model=f"openai/{MODEL}",
        api_base=f"{daemon_url}/v1",
        api_key="none",
        messages=[{"role": "user", "content": "Paris?"}],
        response_format=City,
        temperature=0,
        max_tokens=80,
    )
    City.model_validate_json(answer.choices[0].message.content)


# -- langchain -----------------------------------------------------------------------------------


def test_langchain_openai_binds_a_tool_and_gets_a_call(daemon_url) -> None:
    from langchain_openai import ChatOpenAI

    chat = ChatOpenAI(
        model=MODEL, base_url=f"{daemon_url}/v1", api_key="none", temperature=0, max_tokens=80
    )
    message = chat.bind_tools([get_weather], tool_choice="required").invoke("Weather in Paris?")
    assert message.tool_calls[0]["name"] == "get_weather"
    jsonschema.validate(message.tool_calls[0]["args"], WEATHER)


def test_langchain_openai_structured_output_is_a_pydantic_model(daemon_url) -> None:
    from langchain_openai import ChatOpenAI

    chat = ChatOpenAI(
        model=MODEL, base_url=f"{daemon_url}/v1", api_key="none", temperature=0, max_tokens=80
    )
    city = chat.with_structured_output(City, method="json_schema").invoke("Describe Paris.")
    assert isinstance(city, City)


def test_langchain_ollama_binds_a_tool_and_gets_a_call(tools_daemon) -> None:
    from langchain_ollama import ChatOllama

    chat = ChatOllama(
        model=TOOLS_MODEL,
        base_url=tools_daemon[1],
        temperature=0,
        repeat_penalty=1.0,
        num_predict=80,
    )
    message = chat.bind_tools([get_weather]).invoke(CALL_AGAIN)
    assert message.tool_calls[0]["name"] == "get_weather"
    jsonschema.validate(message.tool_calls[0]["args"], WEATHER)


def test_langchain_ollama_structured_output_is_a_pydantic_model(daemon_url) -> None:
    from langchain_ollama import ChatOllama

    chat = ChatOllama(model=MODEL, base_url=daemon_url, temperature=0, num_predict=80)
    city = chat.with_structured_output(City, method="json_schema").invoke("Describe Paris.")
    assert isinstance(city, City)
