"""OpenAI's Responses API (/v1/responses) with the official `openai` client's
`client.responses`, unmodified, against live daemons: SmolLM2 (the shared daemon), Gemma 3
270M, and the test model whose template takes tools and thinks (tools_support.py)."""

from __future__ import annotations

import json

import jsonschema
import openai
import pytest

from tests.support.agents_support import (  # noqa: F401  (fixtures)
    ASK_WEATHER,
    COPY_TRIGGER,
    RESPONSES_TOOLS,
    SCHEMAS,
    both,
    gemma,
    served,
    smol,
    thinker,
)
from tests.support.helpers import wait_all_free
from tests.support.tools_support import tools_daemon  # noqa: F401  (fixture)

HELLO = "Say hello."
PERSON = {
    "type": "object",
    "properties": {"name": {"type": "string", "maxLength": 20}, "age": {"type": "integer"}},
    "required": ["name", "age"],
}


def respond(s, input=HELLO, **extra):
    return s.openai.responses.create(
        model=s.model, input=input, **{"max_output_tokens": 24, "temperature": 0, **extra}
    )


def calls(response) -> list:
    return [item for item in response.output if item.type == "function_call"]


# -- text ----------------------------------------------------------------------------------------


def test_a_response_answers_with_a_message_item_and_usage(both) -> None:
    response = respond(both)
    assert response.object == "response" and response.id.startswith("resp_")
    assert response.status in ("completed", "incomplete") and response.output_text
    message = response.output[0]
    assert message.type == "message" and message.role == "assistant"
    assert message.content[0].type == "output_text"
    assert response.usage.input_tokens > 5 and response.usage.output_tokens > 0
    assert response.usage.input_tokens_details.cached_tokens <= response.usage.input_tokens


def test_instructions_steer_the_answer_as_a_chat_system_message_does(smol) -> None:
    """Greedy: the answer with instructions is the one Chat Completions gives with the same
    text as its system message, and not the one without."""
    steered = respond(smol, instructions="You are a pirate.", max_output_tokens=16)
    plain = respond(smol, max_output_tokens=16)
    as_chat = chat(smol, [{"role": "system", "content": "You are a pirate."}])
    assert steered.instructions == "You are a pirate."
    assert steered.output_text == as_chat and steered.output_text != plain.output_text


def test_a_developer_item_steers_the_answer_as_a_chat_system_message_does(smol) -> None:
    items = [
        {"type": "message", "role": "developer", "content": "Answer in French."},
        {"role": "user", "content": [{"type": "input_text", "text": HELLO}]},
    ]
    steered = respond(smol, items, max_output_tokens=16).output_text
    plain = respond(smol, max_output_tokens=16).output_text
    assert steered == chat(smol, [{"role": "system", "content": "Answer in French."}])
    assert steered != plain


def chat(s, system: list[dict]) -> str:
    """The greedy answer of Chat Completions on the same daemon, to HELLO after `system`."""
    messages = [*system, {"role": "user", "content": HELLO}]
    answer = s.openai.chat.completions.create(
        model=s.model, messages=messages, max_tokens=16, temperature=0
    )
    return answer.choices[0].message.content


def test_max_output_tokens_leaves_the_response_incomplete_with_the_reason(smol) -> None:
    response = respond(smol, "Write a long story.", max_output_tokens=5)
    assert response.status == "incomplete" and response.usage.output_tokens == 5
    assert response.incomplete_details.reason == "max_output_tokens"


def test_a_streamed_response_comes_as_numbered_events(both) -> None:
    events = list(respond(both, stream=True))
    kinds = [e.type for e in events]
    assert kinds[:2] == ["response.created", "response.in_progress"]
    assert kinds[-1] in ("response.completed", "response.incomplete")
    assert [e.sequence_number for e in events] == list(range(len(events)))
    assert {
        "response.output_item.added",
        "response.content_part.added",
        "response.output_text.done",
        "response.output_item.done",
    } <= set(kinds)
    text = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    assert text and events[-1].response.output_text == text


def test_the_stream_helper_builds_the_final_response(smol) -> None:
    # The helper wants response.completed: a JSON answer ends well within the cap.
    fmt = {"type": "json_schema", "name": "person", "schema": PERSON}
    with smol.openai.responses.stream(
        model=smol.model,
        input="Describe a person as JSON.",
        max_output_tokens=60,
        temperature=0,
        text={"format": fmt},
    ) as stream:
        for _ in stream:
            pass
        final = stream.get_final_response()
    assert json.loads(final.output_text)["name"]


def test_a_client_that_leaves_mid_stream_frees_its_slot(smol) -> None:
    stream = respond(smol, "Write a very long story.", max_output_tokens=400, stream=True)
    for event in stream:
        if event.type == "response.output_text.delta":
            break
    stream.close()
    assert wait_all_free(smol.url) == {"running": 0, "queued": 0, "in_flight": 0}


# -- tools ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("choice", ["required", {"type": "function", "name": "get_time"}])
def test_a_forced_tool_choice_answers_with_function_calls_of_valid_arguments(both, choice) -> None:
    response = respond(
        both, ASK_WEATHER, tools=RESPONSES_TOOLS, tool_choice=choice, max_output_tokens=80
    )
    found = calls(response)
    assert found  # with parallel calls, as many as fit max_output_tokens
    for call in found:
        assert call.call_id.startswith("call_") and call.id.startswith("fc_")
        jsonschema.validate(
            json.loads(call.arguments), {**SCHEMAS[call.name], "additionalProperties": False}
        )
    if isinstance(choice, dict):
        assert {c.name for c in found} == {"get_time"}


def test_streamed_arguments_arrive_as_function_call_arguments_events(both) -> None:
    events = list(
        respond(
            both,
            ASK_WEATHER,
            tools=RESPONSES_TOOLS,
            tool_choice="required",
            max_output_tokens=80,
            stream=True,
        )
    )
    added = [
        e
        for e in events
        if e.type == "response.output_item.added" and e.item.type == "function_call"
    ]
    assert added and added[0].item.arguments == ""
    deltas = "".join(e.delta for e in events if e.type == "response.function_call_arguments.delta")
    done = [e for e in events if e.type == "response.function_call_arguments.done"]
    assert done and deltas.startswith(done[0].arguments)
    jsonschema.validate(json.loads(done[0].arguments), SCHEMAS[added[0].item.name])


def test_parallel_tool_calls_false_gives_one_call(thinker) -> None:
    response = respond(
        thinker,
        ASK_WEATHER,
        tools=RESPONSES_TOOLS,
        tool_choice="required",
        parallel_tool_calls=False,
        max_output_tokens=120,
    )
    assert len(calls(response)) == 1


def test_an_auto_call_starts_when_the_model_writes_the_trigger(thinker) -> None:
    response = respond(thinker, COPY_TRIGGER, tools=RESPONSES_TOOLS, max_output_tokens=80)
    assert calls(response)


def test_a_function_call_output_fed_back_gets_an_answer(both) -> None:
    first = respond(
        both, ASK_WEATHER, tools=RESPONSES_TOOLS, tool_choice="required", max_output_tokens=80
    )
    call = calls(first)[0]
    items = [
        {"role": "user", "content": ASK_WEATHER},
        *[i.model_dump() for i in first.output],
        {"type": "function_call_output", "call_id": call.call_id, "output": "Sunny, 21 C"},
    ]
    answer = respond(both, items, tools=RESPONSES_TOOLS, tool_choice="none")
    assert answer.output_text and not calls(answer)


def test_tools_run_by_openai_are_left_out_and_custom_tools_refused(smol) -> None:
    response = respond(smol, tools=[{"type": "web_search"}, *RESPONSES_TOOLS])
    assert response.output_text or calls(response)
    with pytest.raises(openai.BadRequestError, match="custom"):
        respond(smol, tools=[{"type": "custom", "name": "patch"}])


def test_the_functions_of_a_namespace_tool_are_called_by_namespace_and_name(smol) -> None:
    namespace = {
        "type": "namespace",
        "name": "weather",
        "description": "Weather tools",
        "tools": [{**RESPONSES_TOOLS[0], "name": "current"}],
    }
    response = respond(
        smol, ASK_WEATHER, tools=[namespace], tool_choice="required", max_output_tokens=80
    )
    call = calls(response)[0]
    assert (call.namespace, call.name) == ("weather", "current")


# -- structured output and reasoning -------------------------------------------------------------


def test_text_format_json_schema_gives_json_its_schema_accepts(both) -> None:
    fmt = {"type": "json_schema", "name": "person", "schema": PERSON, "strict": True}
    response = respond(
        both, "Describe a person as JSON.", text={"format": fmt}, max_output_tokens=60
    )
    jsonschema.validate(json.loads(response.output_text), {**PERSON, "additionalProperties": False})


def test_text_format_json_object_gives_an_object(smol) -> None:
    response = respond(
        smol,
        "Describe a cat as JSON.",
        text={"format": {"type": "json_object"}},
        max_output_tokens=40,
    )
    assert response.output_text.lstrip().startswith("{")


def test_reasoning_effort_gives_a_reasoning_item_with_its_summary(thinker) -> None:
    response = respond(
        thinker, reasoning={"effort": "high", "summary": "auto"}, max_output_tokens=30
    )
    reasoning = response.output[0]
    assert reasoning.type == "reasoning" and reasoning.summary[0].text
    assert reasoning.content[0].text == reasoning.summary[0].text
    assert "<think>" not in reasoning.summary[0].text


def test_streamed_reasoning_arrives_as_reasoning_text_deltas(thinker) -> None:
    events = list(respond(thinker, reasoning={"effort": "low"}, max_output_tokens=20, stream=True))
    assert any(e.type == "response.reasoning_text.delta" and e.delta for e in events)


def test_reasoning_effort_none_does_not_think(thinker) -> None:
    response = respond(thinker, reasoning={"effort": "none"})
    assert [i.type for i in response.output] == ["message"]


def test_reasoning_on_a_model_that_does_not_think_answers_directly(smol) -> None:
    response = respond(smol, reasoning={"effort": "medium", "summary": "auto"})
    assert [i.type for i in response.output] == ["message"]


# -- stored responses ----------------------------------------------------------------------------


def test_previous_response_id_continues_the_stored_conversation(smol) -> None:
    first = respond(smol, "My name is Ada. Say hello.", max_output_tokens=8)
    follow = respond(smol, "What is my name?", previous_response_id=first.id)
    assert follow.previous_response_id == first.id
    assert follow.usage.input_tokens > first.usage.input_tokens + first.usage.output_tokens
    assert follow.usage.input_tokens_details.cached_tokens >= first.usage.input_tokens - 1


def test_a_stored_response_can_be_retrieved_and_deleted(smol) -> None:
    response = respond(smol)
    assert smol.openai.responses.retrieve(response.id).output_text == response.output_text
    smol.openai.responses.delete(response.id)
    with pytest.raises(openai.NotFoundError):
        smol.openai.responses.retrieve(response.id)


def test_a_response_not_stored_cannot_be_continued(smol) -> None:
    response = respond(smol, store=False)
    with pytest.raises(openai.NotFoundError, match="not found"):
        respond(smol, previous_response_id=response.id)


def test_an_unknown_previous_response_id_is_a_404(smol) -> None:
    with pytest.raises(openai.NotFoundError) as caught:
        respond(smol, previous_response_id="resp_nothing")
    assert caught.value.body["param"] == "previous_response_id"


# -- accepted fields and errors ------------------------------------------------------------------


def test_codexs_fields_are_accepted(smol) -> None:
    response = respond(
        smol,
        store=False,
        include=["reasoning.encrypted_content"],
        prompt_cache_key="k",
        metadata={"a": "b"},
        parallel_tool_calls=True,
        extra_body={"client_metadata": {"x": "y"}},
    )
    assert response.output_text and response.metadata == {"a": "b"}


def test_an_unknown_model_is_a_404(smol) -> None:
    with pytest.raises(openai.NotFoundError):
        smol.openai.responses.create(model="no-such-model", input=HELLO)


def test_a_prompt_longer_than_the_context_is_a_400_that_says_so(smol) -> None:
    with pytest.raises(openai.BadRequestError, match="context"):
        respond(smol, "word " * 3000)


@pytest.mark.parametrize(
    "extra",
    [
        {"temperature": 5},
        {"truncation": "auto"},
        {"top_logprobs": 3},
        {"extra_body": {"background": True}},
    ],
)
def test_a_bad_or_unknown_field_is_a_400_naming_it(smol, extra) -> None:
    with pytest.raises(openai.BadRequestError) as caught:
        respond(smol, **extra)
    assert caught.value.body["param"]


def test_a_missing_key_is_a_401(daemon_factory) -> None:
    _, url = daemon_factory(
        ["--model", "smollm2", "--parallel", "1", "--ctx", "512", "--api-key", "sekrit"]
    )
    with pytest.raises(openai.AuthenticationError):
        respond(served(url, "smollm2"))
    keyed = openai.OpenAI(base_url=f"{url}/v1", api_key="sekrit", max_retries=0)
    assert keyed.responses.create(model="smollm2", input=HELLO, max_output_tokens=2).usage
