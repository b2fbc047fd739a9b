"""Tool and response schemas never fail a request (#44): a keyword the grammar cannot enforce
is left unenforced and named in X-Localserve-Unenforced; a schema that cannot compile at all runs
unconstrained, named in X-Localserve-Unconstrained; a strict response schema is refused as
before, naming the keyword."""

from __future__ import annotations

import json

import jsonschema
import openai
import pytest

from tests.support.helpers import MODEL
from tests.support.tools_support import NAMES_BY_PATTERN

ASK = [{"role": "user", "content": "Tag this photo of a cat."}]


def test_a_tool_with_a_keyword_the_grammar_lacks_is_answered_and_the_keyword_named(
    client: openai.OpenAI,
) -> None:
    tool = {"type": "function", "function": {"name": "tag", "parameters": NAMES_BY_PATTERN}}
    raw = client.chat.completions.with_raw_response.create(
        model=MODEL,
        messages=ASK,
        tools=[tool],
        tool_choice="required",
        max_tokens=200,
        temperature=0,
    )
    assert raw.http_response.status_code == 200
    assert "propertyNames" in raw.headers["X-Localserve-Unenforced"]
    # The rest of the schema is enforced (#57): labels an object of strings, and nothing else.
    calls = raw.parse().choices[0].message.tool_calls
    rest = {**NAMES_BY_PATTERN, "additionalProperties": False}
    rest["properties"] = {"labels": {"type": "object", "additionalProperties": {"type": "string"}}}
    assert calls
    for call in calls:
        jsonschema.validate(json.loads(call.function.arguments), rest)


def test_a_response_schema_that_cannot_compile_runs_unconstrained_and_says_so(
    client: openai.OpenAI,
) -> None:
    broken = {"type": "object", "properties": {"a": {"type": "string", "pattern": "[unclosed"}}}
    raw = client.chat.completions.with_raw_response.create(
        model=MODEL,
        messages=ASK,
        max_tokens=8,
        response_format={"type": "json_schema", "json_schema": {"name": "x", "schema": broken}},
    )
    assert raw.http_response.status_code == 200
    assert raw.headers["X-Localserve-Unconstrained"]


def test_a_strict_response_schema_with_such_a_keyword_is_refused_naming_it(
    client: openai.OpenAI,
) -> None:
    spec = {"name": "x", "schema": NAMES_BY_PATTERN, "strict": True}
    with pytest.raises(openai.BadRequestError) as err:
        client.chat.completions.create(
            model=MODEL,
            messages=ASK,
            max_tokens=8,
            response_format={"type": "json_schema", "json_schema": spec},
        )
    assert "propertyNames" in str(err.value)
