"""Anthropic's Messages API (/v1/messages, /v1/messages/count_tokens) with the official
`anthropic` client, unmodified, against live daemons: SmolLM2 (the shared daemon), Gemma 3
270M, and the test model whose template takes tools and thinks (tools_support.py)."""

from __future__ import annotations

import json

import anthropic
import httpx
import jsonschema
import pytest

from tests.support.agents_support import (  # noqa: F401  (fixtures)
    ANTHROPIC_TOOLS, ASK_WEATHER, COPY_TRIGGER, SCHEMAS, both, gemma, served, smol, thinker,
)
from tests.support.live import CLIENT_TIMEOUT_S
from tests.support.helpers import wait_all_free
from tests.support.tools_support import tools_daemon  # noqa: F401  (fixture)

HELLO = [{"role": "user", "content": "Say hello."}]


def ask(s, messages=HELLO, **extra):
    """A greedy message (the 2026 SDK no longer names the sampling fields: they go in the
    body)."""
    body = {"temperature": 0, **extra.pop("extra_body", {})}
    for key in ("temperature", "top_p", "top_k"):
        if key in extra:
            body[key] = extra.pop(key)
    return s.anthropic.messages.create(
        model=s.model, messages=messages, extra_body=body, **{"max_tokens": 24, **extra}
    )


# -- text ----------------------------------------------------------------------------------------


def test_a_message_answers_with_a_text_block_and_usage(both) -> None:
    message = ask(both)
    assert message.type == "message" and message.role == "assistant"
    assert message.id.startswith("msg_") and message.model == both.model
    assert [b.type for b in message.content] == ["text"] and message.content[0].text
    assert message.stop_reason in ("end_turn", "max_tokens")
    assert message.usage.output_tokens > 0
    assert message.usage.input_tokens + message.usage.cache_read_input_tokens > 5


def test_max_tokens_ends_the_answer_with_stop_reason_max_tokens(smol) -> None:
    message = ask(smol, [{"role": "user", "content": "Write a long story."}], max_tokens=5)
    assert message.stop_reason == "max_tokens" and message.usage.output_tokens == 5


def test_a_stop_sequence_ends_the_answer_and_is_named(smol) -> None:
    # Greedy SmolLM2 counts "1. 1\n2. 2\n3. 3\n...".
    message = ask(smol, [{"role": "user", "content": "Count from 1 to 10."}], max_tokens=40,
                  stop_sequences=["9.", "4."])  # fmt: skip
    assert message.stop_reason == "stop_sequence" and message.stop_sequence == "4."
    assert message.content[0].text.endswith("3. 3\n")


def test_the_system_prompt_may_be_text_blocks_with_cache_control(smol) -> None:
    system = [{"type": "text", "text": "You are terse.", "cache_control": {"type": "ephemeral"}}]
    message = ask(smol, system=system, metadata={"user_id": "u1"})
    assert message.content[0].text


def test_a_system_message_mid_conversation_is_taken(smol) -> None:
    messages = [{"role": "user", "content": "Hi."}, {"role": "assistant", "content": "Hello!"},
                {"role": "system", "content": [{"type": "text", "text": "Answer in French."}]},
                {"role": "user", "content": "Say hello."}]  # fmt: skip
    assert ask(smol, messages).content[0].text


def test_fields_with_no_local_effect_are_accepted(smol) -> None:
    message = ask(smol, extra_body={"context_management": {"edits": []},
                                    "output_config": {"effort": "low"}})  # fmt: skip
    assert message.content[0].text


# -- streaming -----------------------------------------------------------------------------------


def test_a_streamed_message_comes_as_anthropics_event_sequence(both) -> None:
    events = list(ask(both, stream=True))
    kinds = [e.type for e in events]
    assert kinds[0] == "message_start" and kinds[-2:] == ["message_delta", "message_stop"]
    assert "content_block_start" in kinds and "content_block_stop" in kinds
    text = "".join(e.delta.text for e in events if e.type == "content_block_delta")
    assert text and events[-2].delta.stop_reason in ("end_turn", "max_tokens")
    assert events[-2].usage.output_tokens > 0


def test_the_stream_helper_builds_the_final_message(smol) -> None:
    with smol.anthropic.messages.stream(model=smol.model, messages=HELLO, max_tokens=16,
                                        extra_body={"temperature": 0}) as stream:  # fmt: skip
        streamed = "".join(stream.text_stream)
        final = stream.get_final_message()
    assert streamed and final.content[0].text == streamed
    assert final.usage.output_tokens == 16 or final.stop_reason == "end_turn"


def test_a_client_that_leaves_mid_stream_frees_its_slot(smol) -> None:
    with smol.anthropic.messages.stream(model=smol.model, max_tokens=400, messages=[
        {"role": "user", "content": "Write a very long story."}
    ]) as stream:  # fmt: skip
        next(iter(stream.text_stream))
    assert wait_all_free(smol.url) == {"running": 0, "queued": 0, "in_flight": 0}


# -- tools ---------------------------------------------------------------------------------------


def tool_uses(message) -> list:
    return [b for b in message.content if b.type == "tool_use"]


@pytest.mark.parametrize("choice", [{"type": "any"}, {"type": "tool", "name": "get_time"}])
def test_a_forced_tool_choice_answers_with_tool_use_of_valid_input(both, choice) -> None:
    message = ask(both, [{"role": "user", "content": ASK_WEATHER}], max_tokens=80,
                  tools=ANTHROPIC_TOOLS, tool_choice=choice)  # fmt: skip
    uses = tool_uses(message)
    assert message.stop_reason == "tool_use" and uses
    for use in uses:
        assert use.id.startswith("toolu_") and isinstance(use.input, dict)
        jsonschema.validate(use.input, {**SCHEMAS[use.name], "additionalProperties": False})
    if choice["type"] == "tool":
        assert {u.name for u in uses} == {"get_time"}


def test_disable_parallel_tool_use_gives_one_call(thinker) -> None:
    message = ask(thinker, [{"role": "user", "content": ASK_WEATHER}], max_tokens=120,
                  tools=ANTHROPIC_TOOLS,
                  tool_choice={"type": "any", "disable_parallel_tool_use": True})  # fmt: skip
    assert len(tool_uses(message)) == 1


def test_an_auto_call_starts_when_the_model_writes_the_trigger(thinker) -> None:
    message = ask(thinker, [{"role": "user", "content": COPY_TRIGGER}], max_tokens=80,
                  tools=ANTHROPIC_TOOLS)  # fmt: skip
    assert message.stop_reason == "tool_use" and tool_uses(message)


def test_tool_choice_none_answers_in_text(thinker) -> None:
    message = ask(thinker, [{"role": "user", "content": COPY_TRIGGER}], max_tokens=20,
                  tools=ANTHROPIC_TOOLS, tool_choice={"type": "none"})  # fmt: skip
    assert not tool_uses(message) and message.stop_reason != "tool_use"


def test_streamed_tool_input_arrives_as_input_json_delta(both) -> None:
    events = list(ask(both, [{"role": "user", "content": ASK_WEATHER}], max_tokens=80,
                      tools=ANTHROPIC_TOOLS, tool_choice={"type": "any"}, stream=True))
    starts = [e for e in events if e.type == "content_block_start"
              and e.content_block.type == "tool_use"]  # fmt: skip
    assert starts and starts[0].content_block.input == {}
    index = starts[0].index
    partial = "".join(e.delta.partial_json for e in events if e.type == "content_block_delta"
                      and e.index == index)  # fmt: skip
    jsonschema.validate(json.loads(partial), SCHEMAS[starts[0].content_block.name])
    assert events[-2].delta.stop_reason == "tool_use"


def test_a_tool_result_fed_back_gets_an_answer(both) -> None:
    first = ask(both, [{"role": "user", "content": ASK_WEATHER}], max_tokens=80,
                tools=ANTHROPIC_TOOLS, tool_choice={"type": "tool", "name": "get_weather"})
    use = tool_uses(first)[0]
    messages = [
        {"role": "user", "content": ASK_WEATHER},
        {"role": "assistant", "content": [b.model_dump() for b in first.content]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": use.id, "content": "Sunny, 21 C"},
            {"type": "text", "text": "Tell me in one sentence."},
        ]},
    ]  # fmt: skip
    answer = ask(both, messages, max_tokens=30, tools=ANTHROPIC_TOOLS, tool_choice={"type": "none"})
    assert answer.content[0].type == "text" and answer.content[0].text


def test_a_tool_result_may_be_an_error_in_text_blocks(smol) -> None:
    messages = [
        {"role": "user", "content": ASK_WEATHER},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1",
                                           "name": "get_weather", "input": {"city": "Paris"}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1",
                                      "is_error": True,
                                      "content": [{"type": "text", "text": "no network"}]}]},
    ]  # fmt: skip
    assert ask(smol, messages, tools=ANTHROPIC_TOOLS).content


def test_a_deferred_tool_is_not_offered(smol) -> None:
    deferred = {**ANTHROPIC_TOOLS[1], "defer_loading": True}
    message = ask(smol, [{"role": "user", "content": ASK_WEATHER}], max_tokens=80,
                  tools=[ANTHROPIC_TOOLS[0], deferred], tool_choice={"type": "any"})
    assert {u.name for u in tool_uses(message)} == {"get_weather"}


# -- thinking and structured output --------------------------------------------------------------


def test_thinking_enabled_returns_thinking_blocks_apart(thinker) -> None:
    message = ask(thinker, max_tokens=40, thinking={"type": "enabled", "budget_tokens": 16})
    assert message.content[0].type == "thinking" and message.content[0].thinking
    assert "<think>" not in message.content[0].thinking


def test_thinking_ends_at_its_budget_and_the_answer_follows(thinker) -> None:
    # SmolLM2 never closes a <think> block of its own: the budget's grammar closes it.
    message = ask(thinker, max_tokens=40, thinking={"type": "enabled", "budget_tokens": 6})
    thinking, *rest = message.content
    assert thinking.type == "thinking" and 0 < len(thinking.thinking.split()) <= 6
    assert [b.type for b in rest] == ["text"] and rest[0].text


def test_a_thinking_budget_and_tool_calls_are_enforced_together(thinker) -> None:
    message = ask(thinker, [{"role": "user", "content": ASK_WEATHER}], max_tokens=90,
                  thinking={"type": "enabled", "budget_tokens": 6}, tools=ANTHROPIC_TOOLS,
                  tool_choice={"type": "any"})  # fmt: skip
    assert message.content[0].type == "thinking" and tool_uses(message)


def test_streamed_thinking_arrives_as_thinking_delta(thinker) -> None:
    events = list(ask(thinker, max_tokens=40, stream=True,
                      thinking={"type": "enabled", "budget_tokens": 16}))
    deltas = [e.delta for e in events if e.type == "content_block_delta"]
    assert deltas and deltas[0].type == "thinking_delta" and deltas[0].thinking


def test_thinking_display_omitted_sends_blocks_without_their_text(thinker) -> None:
    message = ask(thinker, max_tokens=40, extra_body={"thinking": {
        "type": "enabled", "budget_tokens": 16, "display": "omitted"}})  # fmt: skip
    assert message.content[0].type == "thinking" and message.content[0].thinking == ""


def test_adaptive_thinking_on_a_model_that_does_not_think_answers_directly(smol) -> None:
    message = ask(smol, thinking={"type": "adaptive"})
    assert [b.type for b in message.content] == ["text"]


def test_thinking_enabled_on_a_model_that_does_not_think_is_a_400(smol) -> None:
    with pytest.raises(anthropic.BadRequestError, match="thinking"):
        ask(smol, max_tokens=40, thinking={"type": "enabled", "budget_tokens": 16})


def test_output_config_format_gives_json_its_schema_accepts(both) -> None:
    schema = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 20},
                                               "age": {"type": "integer"}},
              "required": ["name", "age"]}  # fmt: skip
    message = ask(both, [{"role": "user", "content": "Describe a person as JSON."}],
                  max_tokens=60, extra_body={"output_config": {"format": {
                      "type": "json_schema", "schema": schema}}})  # fmt: skip
    value = json.loads(message.content[0].text)
    jsonschema.validate(value, {**schema, "additionalProperties": False})


# -- count_tokens and the prompt cache -----------------------------------------------------------


def test_count_tokens_gives_the_rendered_prompts_token_count(both) -> None:
    counted = both.anthropic.messages.count_tokens(model=both.model, messages=HELLO,
                                                   system="Be brief.")  # fmt: skip
    message = ask(both, system="Be brief.")
    assert counted.input_tokens == message.usage.input_tokens + message.usage.cache_read_input_tokens


def test_count_tokens_counts_the_tools_too(smol) -> None:
    bare = smol.anthropic.messages.count_tokens(model=smol.model, messages=HELLO)
    with_tools = smol.anthropic.messages.count_tokens(model=smol.model, messages=HELLO,
                                                      tools=ANTHROPIC_TOOLS)  # fmt: skip
    assert with_tools.input_tokens > bare.input_tokens + 20


def test_claude_codes_billing_header_leaves_the_prompt_cache_warm(smol) -> None:
    rules = "You are a careful assistant. " * 40

    def turn(n: int):
        system = [{"type": "text", "text": f"x-anthropic-billing-header: cc_version=2.1.{n}; "
                                           f"cc_entrypoint=sdk-cli; cch={n:05x};"},
                  {"type": "text", "text": rules}]  # fmt: skip
        return ask(smol, system=system, max_tokens=4)

    first, second = turn(1), turn(2)
    total = second.usage.input_tokens + second.usage.cache_read_input_tokens
    assert total == first.usage.input_tokens + first.usage.cache_read_input_tokens
    assert second.usage.cache_read_input_tokens >= total - 8


# -- errors --------------------------------------------------------------------------------------


def test_an_unknown_model_is_a_not_found_error(smol) -> None:
    with pytest.raises(anthropic.NotFoundError) as caught:
        smol.anthropic.messages.create(model="no-such-model", messages=HELLO, max_tokens=5)
    assert caught.value.body["type"] == "error"
    assert caught.value.body["error"]["type"] == "not_found_error"


def test_a_prompt_longer_than_the_context_is_a_400_that_says_so(smol) -> None:
    long = [{"role": "user", "content": "word " * 3000}]
    with pytest.raises(anthropic.BadRequestError, match="context"):
        ask(smol, long)


@pytest.mark.parametrize("extra", [{"temperature": 3}, {"extra_body": {"mcp_servers": []}},
                                   {"extra_body": {"top_logprobs": 2}}])  # fmt: skip
def test_a_bad_or_unknown_field_is_an_invalid_request_error(smol, extra) -> None:
    with pytest.raises(anthropic.BadRequestError) as caught:
        ask(smol, **extra)
    assert caught.value.body["error"]["type"] == "invalid_request_error"


def test_an_image_block_is_a_400_on_a_model_that_reads_text(smol) -> None:
    image = {"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                         "data": "iVBORw0KGgo="}}  # fmt: skip
    with pytest.raises(anthropic.BadRequestError, match="image"):
        ask(smol, [{"role": "user", "content": [image, {"type": "text", "text": "What?"}]}])


def test_a_missing_max_tokens_is_a_400(smol) -> None:
    response = httpx.post(f"{smol.url}/v1/messages", json={"model": smol.model,
                                                            "messages": HELLO})  # fmt: skip
    assert response.status_code == 400 and response.json()["error"]["type"] == \
        "invalid_request_error"


def test_the_api_key_is_taken_from_x_api_key_or_bearer(daemon_factory) -> None:
    _, url = daemon_factory(["--model", "smollm2", "--parallel", "1", "--ctx", "512",
                             "--api-key", "sekrit"])  # fmt: skip
    with pytest.raises(anthropic.AuthenticationError):
        served(url, "smollm2").anthropic.messages.create(model="smollm2", messages=HELLO,
                                                          max_tokens=2)  # fmt: skip
    by_key = anthropic.Anthropic(base_url=url, api_key="sekrit", timeout=CLIENT_TIMEOUT_S)
    by_token = anthropic.Anthropic(base_url=url, auth_token="sekrit", timeout=CLIENT_TIMEOUT_S)
    for client in (by_key, by_token):
        assert client.messages.create(model="smollm2", messages=HELLO, max_tokens=2).usage
