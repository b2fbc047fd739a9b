"""Structured output: OpenAI's response_format and Ollama's format constrain the answer with a
grammar compiled from the JSON Schema, so it always parses and validates, even from SmolLM2.

Tested with the official openai and ollama clients and with instructor, unmodified; answers are
checked with jsonschema.
"""

from __future__ import annotations

import json
from typing import Literal

import instructor
import jsonschema
import ollama
import openai
import pytest
from pydantic import BaseModel

from tests.support.helpers import MODEL
from tests.support.ollama_support import ollama_client  # noqa: F401  (fixture)

PERSON = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "maxLength": 20},
        "age": {"type": "integer"},
        "pets": {"type": "array", "items": {"type": "string", "maxLength": 10}, "maxItems": 3},
        "mood": {"enum": ["happy", "sad"]},
        "address": {
            "type": "object",
            "properties": {"city": {"type": "string", "maxLength": 20}},
            "required": ["city"],
        },
    },
    "required": ["name", "age", "pets", "mood", "address"],
}
ASK = [{"role": "user", "content": "Describe a person called Ann, 31, in Paris, with two cats."}]


def openai_json(client: openai.OpenAI, response_format: dict, **extra) -> str:
    answer = client.chat.completions.create(
        model=MODEL,
        messages=ASK,
        response_format=response_format,
        max_tokens=200,
        **{"temperature": 0, **extra},
    )
    return answer.choices[0].message.content or ""


def test_a_json_schema_answer_parses_and_validates(client) -> None:
    fmt = {
        "type": "json_schema",
        "json_schema": {"name": "person", "schema": PERSON, "strict": True},
    }
    jsonschema.validate(json.loads(openai_json(client, fmt)), PERSON)


def test_a_sampled_json_schema_answer_validates_too(client) -> None:
    fmt = {"type": "json_schema", "json_schema": {"name": "person", "schema": PERSON}}
    answer = openai_json(client, fmt, temperature=1.0, seed=7)
    jsonschema.validate(json.loads(answer), PERSON)


def test_a_streamed_json_schema_answer_validates(client) -> None:
    fmt = {"type": "json_schema", "json_schema": {"name": "person", "schema": PERSON}}
    text = "".join(
        chunk.choices[0].delta.content or ""
        for chunk in client.chat.completions.create(
            model=MODEL,
            messages=ASK,
            response_format=fmt,
            max_tokens=200,
            temperature=0,
            stream=True,
        )
        if chunk.choices
    )
    jsonschema.validate(json.loads(text), PERSON)


# JSON mode bounds nothing but the syntax: a short ask, so the object closes within max_tokens.
SHORT = [
    {
        "role": "user",
        "content": 'Reply with a JSON object with the keys "name" and "age" for Ann, who is 31.',
    }
]


def test_json_object_mode_answers_a_json_object(client) -> None:
    answer = client.chat.completions.create(
        model=MODEL,
        messages=SHORT,
        response_format={"type": "json_object"},
        max_tokens=200,
        temperature=0,
    )
    assert isinstance(json.loads(answer.choices[0].message.content or ""), dict)


def test_ollama_format_json_answers_a_json_object(ollama_client: ollama.Client) -> None:
    answer = ollama_client.chat(
        model=MODEL, messages=SHORT, format="json", options={"temperature": 0, "num_predict": 200}
    )
    assert isinstance(json.loads(answer.message.content), dict)


def test_ollama_format_with_a_schema_validates(ollama_client: ollama.Client) -> None:
    answer = ollama_client.generate(
        model=MODEL,
        prompt=ASK[0]["content"],
        format=PERSON,
        options={"temperature": 0, "num_predict": 200},
    )
    jsonschema.validate(json.loads(answer.response), PERSON)


UNIQUE = {"type": "object", "properties": {"n": {"type": "array", "uniqueItems": True}}}


def test_a_schema_keyword_that_cannot_be_enforced_is_left_unenforced_and_named(client) -> None:
    fmt = {"type": "json_schema", "json_schema": {"name": "n", "schema": UNIQUE}}
    raw = client.chat.completions.with_raw_response.create(
        model=MODEL, messages=ASK, response_format=fmt, max_tokens=40, temperature=0
    )
    assert "uniqueItems" in raw.headers["X-Localserve-Unenforced"]
    assert (raw.parse().choices[0].message.content or "").startswith("{")


def test_in_a_strict_schema_a_keyword_that_cannot_be_enforced_is_a_400_naming_it(client) -> None:
    fmt = {"type": "json_schema", "json_schema": {"name": "n", "schema": UNIQUE, "strict": True}}
    with pytest.raises(openai.BadRequestError, match="uniqueItems"):
        openai_json(client, fmt)


def test_numeric_bounds_are_enforced(client) -> None:
    schema = {
        "type": "object",
        "properties": {"n": {"type": "integer", "minimum": 3, "maximum": 5}},
        "required": ["n"],
    }
    fmt = {"type": "json_schema", "json_schema": {"name": "n", "schema": schema}}
    answer = openai_json(client, fmt, temperature=1.0, seed=3)
    jsonschema.validate(json.loads(answer), schema)


def test_an_unknown_response_format_type_is_a_400(client) -> None:
    with pytest.raises(openai.BadRequestError, match="response_format.type"):
        openai_json(client, {"type": "xml"})


class Pet(BaseModel):
    name: str
    kind: Literal["cat", "dog"]


class Owner(BaseModel):
    name: str
    age: int
    pets: list[Pet]


def test_instructor_extracts_a_pydantic_model(client) -> None:
    extract = instructor.from_openai(client, mode=instructor.Mode.JSON_SCHEMA)
    owner = extract.chat.completions.create(
        model=MODEL,
        response_model=Owner,
        max_retries=0,
        temperature=0,
        max_tokens=200,
        messages=[{"role": "user", "content": "Ann is 31 and has a cat called Tom."}],
    )
    assert isinstance(owner, Owner) and isinstance(owner.age, int)
