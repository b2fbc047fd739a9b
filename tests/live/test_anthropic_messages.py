"""Anthropic's Messages API (/v1/messages, /v1/messages/count_tokens) with the official
`anthropic` client, unmodified, against live daemons (SmolLM2, the shared daemon, and Gemma 3
270M): text answers, their stop reasons and usage, the stream of events, counted tokens and the
prompt cache, and the errors. Tool use is test_anthropic_tools.py's; thinking and structured
output are test_anthropic_thinking.py's."""

from __future__ import annotations

import anthropic
import httpx
import pytest

from tests.support.agents_support import (  # noqa: F401  (fixtures)
    ANTHROPIC_TOOLS,
    both,
    gemma,
    served,
    smol,
)
from tests.support.anthropic_support import HELLO, ask
from tests.support.helpers import wait_all_free
from tests.support.live import CLIENT_TIMEOUT_S

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
    message = ask(
        smol,
        [{"role": "user", "content": "Count from 1 to 10."}],
        max_tokens=40,
        stop_sequences=["9.", "4."],
    )
    assert message.stop_reason == "stop_sequence" and message.stop_sequence == "4."
    assert message.content[0].text.endswith("3. 3\n")


def test_system_text_blocks_steer_the_answer_as_a_chat_system_message_does(smol) -> None:
    """Greedy: the blocks, joined by a newline, give the answer the same text gives as Chat
    Completions' system message, and not the one without it."""
    system = [
        {"type": "text", "text": "You are a pirate.", "cache_control": {"type": "ephemeral"}},
        {"type": "text", "text": "Answer in French."},
    ]
    steered = ask(smol, system=system, metadata={"user_id": "u1"}, max_tokens=16)
    plain = ask(smol, max_tokens=16)
    as_chat = chat(
        smol, [{"role": "system", "content": "You are a pirate.\nAnswer in French."}, *HELLO]
    )
    assert steered.content[0].text == as_chat
    assert steered.content[0].text != plain.content[0].text


def test_a_system_message_mid_conversation_steers_the_answer_as_in_chat(smol) -> None:
    before = [{"role": "user", "content": "Hi."}, {"role": "assistant", "content": "Hello!"}]
    last = {"role": "user", "content": "Say hello."}
    system = {"role": "system", "content": [{"type": "text", "text": "Answer in French."}]}
    steered = ask(smol, [*before, system, last], max_tokens=16).content[0].text
    plain = ask(smol, [*before, last], max_tokens=16).content[0].text
    as_chat = chat(smol, [*before, {"role": "system", "content": "Answer in French."}, last])
    assert steered == as_chat and steered != plain


def chat(s, messages: list[dict]) -> str:
    """The greedy answer of Chat Completions on the same daemon, to the same turns."""
    answer = s.openai.chat.completions.create(
        model=s.model, messages=messages, max_tokens=16, temperature=0
    )
    return answer.choices[0].message.content


def test_fields_with_no_local_effect_are_accepted(smol) -> None:
    message = ask(
        smol, extra_body={"context_management": {"edits": []}, "output_config": {"effort": "low"}}
    )
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
    with smol.anthropic.messages.stream(
        model=smol.model, messages=HELLO, max_tokens=16, extra_body={"temperature": 0}
    ) as stream:
        streamed = "".join(stream.text_stream)
        final = stream.get_final_message()
    assert streamed and final.content[0].text == streamed
    assert final.usage.output_tokens == 16 or final.stop_reason == "end_turn"


def test_a_client_that_leaves_mid_stream_frees_its_slot(smol) -> None:
    with smol.anthropic.messages.stream(
        model=smol.model,
        max_tokens=400,
        messages=[{"role": "user", "content": "Write a very long story."}],
    ) as stream:
        next(iter(stream.text_stream))
    assert wait_all_free(smol.url) == {"running": 0, "queued": 0, "in_flight": 0}


# -- count_tokens and the prompt cache -----------------------------------------------------------


def test_count_tokens_gives_the_rendered_prompts_token_count(both) -> None:
    counted = both.anthropic.messages.count_tokens(
        model=both.model, messages=HELLO, system="Be brief."
    )
    message = ask(both, system="Be brief.")
    assert (
        counted.input_tokens == message.usage.input_tokens + message.usage.cache_read_input_tokens
    )


def test_count_tokens_counts_the_tools_too(smol) -> None:
    bare = smol.anthropic.messages.count_tokens(model=smol.model, messages=HELLO)
    with_tools = smol.anthropic.messages.count_tokens(
        model=smol.model, messages=HELLO, tools=ANTHROPIC_TOOLS
    )
    assert with_tools.input_tokens > bare.input_tokens + 20


def test_claude_codes_billing_header_leaves_the_prompt_cache_warm(smol) -> None:
    rules = "You are a careful assistant. " * 40

    def turn(n: int):
        system = [
            {
                "type": "text",
                "text": f"x-anthropic-billing-header: cc_version=2.1.{n}; "
                f"cc_entrypoint=sdk-cli; cch={n:05x};",
            },
            {"type": "text", "text": rules},
        ]
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


@pytest.mark.parametrize(
    "extra",
    [{"temperature": 3}, {"extra_body": {"mcp_servers": []}}, {"extra_body": {"top_logprobs": 2}}],
)
def test_a_bad_or_unknown_field_is_an_invalid_request_error(smol, extra) -> None:
    with pytest.raises(anthropic.BadRequestError) as caught:
        ask(smol, **extra)
    assert caught.value.body["error"]["type"] == "invalid_request_error"


def test_an_image_block_is_a_400_on_a_model_that_reads_text(smol) -> None:
    image = {
        "type": "image",
        "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="},
    }
    with pytest.raises(anthropic.BadRequestError, match="image"):
        ask(smol, [{"role": "user", "content": [image, {"type": "text", "text": "What?"}]}])


def test_a_missing_max_tokens_is_a_400(smol) -> None:
    response = httpx.post(f"{smol.url}/v1/messages", json={"model": smol.model, "messages": HELLO})
    assert (
        response.status_code == 400 and response.json()["error"]["type"] == "invalid_request_error"
    )


def test_the_api_key_is_taken_from_x_api_key_or_bearer(daemon_factory) -> None:
    _, url = daemon_factory(
        ["--model", "smollm2", "--parallel", "1", "--ctx", "512", "--api-key", "sekrit"]
    )
    with pytest.raises(anthropic.AuthenticationError):
        served(url, "smollm2").anthropic.messages.create(
            model="smollm2", messages=HELLO, max_tokens=2
        )
    by_key = anthropic.Anthropic(base_url=url, api_key="sekrit", timeout=CLIENT_TIMEOUT_S)
    by_token = anthropic.Anthropic(base_url=url, auth_token="sekrit", timeout=CLIENT_TIMEOUT_S)
    for client in (by_key, by_token):
        assert client.messages.create(model="smollm2", messages=HELLO, max_tokens=2).usage
