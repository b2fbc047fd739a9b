"""The agent faces for upstream models (docs/upstreams.md): Anthropic's /v1/messages and OpenAI's
/v1/responses forwarded as Chat Completions to llama-cpp-python's own OpenAI server (the
embedded SmolLM2 as `smol-up`) and to a second localserve daemon, through the official
`anthropic` and `openai` clients, unmodified: answers streamed and not, a forced tool call and
its result's turn, the upstream's refusals, a 503 naming an upstream that is down, and an
upstream killed mid-stream.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator

import anthropic
import openai
import pytest

from tests.support.daemons import HOST, free_port, log_text, stop_daemon
from tests.support.live import CLIENT_TIMEOUT_S, start_daemon
from tests.support.upstream_support import (
    ALIAS,
    KEY,
    STORY,
    WEATHER,
    configure,
    get,
    kill,
    oai,
    start_llama_server,
)

PARIS = "What is the weather in Paris?"
TOOL = {
    "name": "get_weather",
    "description": WEATHER["function"]["description"],
    "input_schema": WEATHER["function"]["parameters"],
}
FUNCTION = {"type": "function", **WEATHER["function"]}


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict]:
    """llama-cpp-python's server as upstream `box`, a second localserve as `peer` (its smollm2
    reached as `smollm2@peer`), `ghost` (nothing listens there) naming `big-model`, and the
    daemon under test."""
    port = free_port()
    llama = start_llama_server(port)
    peer, peer_url = start_daemon(["--model", "smollm2", "--ctx", "1024"])
    config = tmp_path_factory.mktemp("upstreams") / "config.toml"
    env = configure(config, {"box": f"http://{HOST}:{port}/v1", "peer": f"{peer_url}/v1"})
    ghost = [sys.executable, "-m", "localserve", "upstream", "add", "ghost"]
    ghost += [f"http://{HOST}:{free_port()}/v1", "--models", "big-model"]
    subprocess.run(ghost, env={**os.environ, **env}, check=True)
    args = ["--no-default-model", "--upstream-failures", "1", "--upstream-retry", "1"]
    args += ["--upstream-probe-interval", "1", "--verbose"]
    proc, url = start_daemon(args, env=env)
    up = {"url": url, "llama": llama, "port": port}
    try:
        yield up
    finally:
        stop_daemon(proc)
        stop_daemon(peer)
        kill(up["llama"])
        assert KEY not in log_text(proc.log_path), "the upstream's key is in the daemon's log"


def claude(url: str) -> anthropic.Anthropic:
    return anthropic.Anthropic(
        base_url=url, api_key="none", timeout=CLIENT_TIMEOUT_S, max_retries=0
    )


def _state(url: str, upstream: str) -> str:
    return next(u["state"] for u in get(f"{url}/health")["upstreams"] if u["name"] == upstream)


def test_a_message_streamed_and_not(servers: dict) -> None:
    client = claude(servers["url"])
    ask = [{"role": "user", "content": "Say hello."}]
    message = client.messages.create(model=ALIAS, max_tokens=8, messages=ask, system="Be brief.")
    assert message.model == ALIAS and message.content[0].type == "text"
    assert message.content[0].text and message.stop_reason in ("end_turn", "max_tokens")
    assert message.usage.input_tokens > 0 and message.usage.output_tokens > 0
    with client.messages.stream(model=ALIAS, max_tokens=8, messages=ask) as stream:
        kinds = [event.type for event in stream]
        final = stream.get_final_message()
    assert kinds[0] == "message_start" and kinds[-1] == "message_stop"
    # llama-cpp-python's server reports no usage in a stream (no stream_options): 0 then.
    assert "content_block_delta" in kinds and final.content[0].text
    counted = client.messages.count_tokens(model=ALIAS, messages=ask)
    assert counted.input_tokens > 0


def test_a_streams_usage_is_the_upstreams_where_it_reports_one(servers: dict) -> None:
    """A localserve peer streams its usage (stream_options.include_usage): both faces give it."""
    ask = [{"role": "user", "content": "Say hello."}]
    with claude(servers["url"]).messages.stream(
        model="smollm2@peer", max_tokens=8, messages=ask
    ) as stream:
        final = stream.get_final_message()
    assert final.model == "smollm2@peer" and final.content[0].text
    assert final.usage.input_tokens > 0 and final.usage.output_tokens > 0
    completed = None
    for event in oai(servers["url"]).responses.create(
        model="smollm2@peer", input="Say hello.", max_output_tokens=8, stream=True
    ):
        if event.type in ("response.completed", "response.incomplete"):
            completed = event.response
    assert completed is not None and completed.usage is not None
    assert completed.usage.input_tokens > 0 and completed.usage.output_tokens > 0


def test_a_forced_tool_call_and_its_results_turn_on_anthropics_face(servers: dict) -> None:
    client = claude(servers["url"])
    ask = [{"role": "user", "content": PARIS}]
    forced = {"type": "tool", "name": "get_weather"}
    message = client.messages.create(
        model=ALIAS, max_tokens=40, messages=ask, tools=[TOOL], tool_choice=forced
    )
    use = next(b for b in message.content if b.type == "tool_use")
    assert use.name == "get_weather" and "city" in use.input
    assert message.stop_reason == "tool_use" and use.id.startswith("toolu_")
    with client.messages.stream(
        model=ALIAS, max_tokens=40, messages=ask, tools=[TOOL], tool_choice=forced
    ) as stream:
        deltas = [e.delta.type for e in stream if e.type == "content_block_delta"]
        streamed = stream.get_final_message()
    assert "input_json_delta" in deltas and streamed.stop_reason == "tool_use"
    assert next(b for b in streamed.content if b.type == "tool_use").input["city"]
    result = {"type": "tool_result", "tool_use_id": use.id, "content": "Sunny, 21 C."}
    answer = client.messages.create(
        model=ALIAS,
        max_tokens=16,
        tools=[TOOL],
        messages=[
            *ask,
            {"role": "assistant", "content": [use.model_dump(exclude_none=True)]},
            {"role": "user", "content": [result]},
        ],
    )
    assert answer.content and answer.stop_reason in ("end_turn", "max_tokens", "tool_use")


def test_what_has_no_chat_completions_field_is_a_400_naming_it(servers: dict) -> None:
    with pytest.raises(anthropic.BadRequestError, match="thinking") as exc:
        claude(servers["url"]).messages.create(
            model=ALIAS,
            max_tokens=64,
            messages=[{"role": "user", "content": "Hi"}],
            thinking={"type": "enabled", "budget_tokens": 32},
        )
    assert exc.value.body["error"]["type"] == "invalid_request_error"


def test_a_response_streamed_and_not_and_a_follow_up(servers: dict) -> None:
    client = oai(servers["url"])
    response = client.responses.create(
        model=ALIAS, input="Say hello.", instructions="Be brief.", max_output_tokens=8
    )
    assert response.model == ALIAS and response.output_text
    assert response.status in ("completed", "incomplete") and response.usage.output_tokens > 0
    follow = client.responses.create(
        model=ALIAS, input="Again.", previous_response_id=response.id, max_output_tokens=8
    )
    assert follow.usage.input_tokens > response.usage.input_tokens
    kinds, text = [], ""
    for event in client.responses.create(
        model=ALIAS, input="Say hello.", max_output_tokens=8, stream=True
    ):
        kinds.append(event.type)
        if event.type == "response.output_text.delta":
            text += event.delta
    assert kinds[0] == "response.created" and "response.output_item.added" in kinds
    assert kinds[-1] in ("response.completed", "response.incomplete") and text


def test_a_forced_function_call_and_its_output_on_the_responses_face(servers: dict) -> None:
    client = oai(servers["url"])
    forced = {"type": "function", "name": "get_weather"}
    response = client.responses.create(
        model=ALIAS, input=PARIS, tools=[FUNCTION], tool_choice=forced, max_output_tokens=40
    )
    call = next(item for item in response.output if item.type == "function_call")
    assert call.name == "get_weather" and "city" in json.loads(call.arguments)
    kinds, arguments = [], ""
    for event in client.responses.create(
        model=ALIAS,
        input=PARIS,
        tools=[FUNCTION],
        tool_choice=forced,
        max_output_tokens=40,
        stream=True,
    ):
        kinds.append(event.type)
        if event.type == "response.function_call_arguments.delta":
            arguments += event.delta
    assert "response.function_call_arguments.done" in kinds and json.loads(arguments)["city"]
    answer = client.responses.create(
        model=ALIAS,
        tools=[FUNCTION],
        max_output_tokens=16,
        input=[
            {"role": "user", "content": PARIS},
            {
                "type": "function_call",
                "call_id": call.call_id,
                "name": call.name,
                "arguments": call.arguments,
            },
            {"type": "function_call_output", "call_id": call.call_id, "output": "Sunny, 21 C."},
        ],
    )
    assert answer.status in ("completed", "incomplete") and answer.output


def test_the_upstreams_refusals_come_back_on_both_faces(servers: dict) -> None:
    """A prompt longer than its context (llama-cpp-python's 400, in its own words), and
    OpenAI's json_schema, which it refuses (its 500, naming the json_object it takes)."""
    long = [{"role": "user", "content": "word " * 3000}]
    with pytest.raises(anthropic.BadRequestError, match="2048") as exc:
        claude(servers["url"]).messages.create(model=ALIAS, max_tokens=8, messages=long)
    assert exc.value.body["error"]["type"] == "invalid_request_error"
    with pytest.raises(openai.BadRequestError, match="2048") as too_long:
        oai(servers["url"]).responses.create(model=ALIAS, input=long, max_output_tokens=8)
    assert too_long.value.code == "context_length_exceeded"  # the upstream's own code
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
    with pytest.raises(openai.APIStatusError, match="json_object") as refused:
        oai(servers["url"]).responses.create(
            model=ALIAS,
            input="A small number n, in JSON.",
            text={"format": {"type": "json_schema", "name": "n", "schema": schema}},
            max_output_tokens=8,
        )
    assert refused.value.status_code == 500


def test_an_upstream_that_is_down_is_a_503_naming_it_on_both_faces(servers: dict) -> None:
    with pytest.raises(anthropic.APIStatusError, match="upstream 'ghost'") as down:
        claude(servers["url"]).messages.create(
            model="big-model", max_tokens=8, messages=[{"role": "user", "content": "Hi"}]
        )
    assert down.value.status_code == 503
    assert down.value.body["type"] == "error"
    with pytest.raises(openai.InternalServerError, match="upstream 'ghost'") as exc:
        oai(servers["url"]).responses.create(model="big-model", input="Hi")
    assert exc.value.status_code == 503 and exc.value.code == "upstream_unavailable"


def test_an_upstream_killed_mid_stream_is_an_error_event_on_both_faces(servers: dict) -> None:
    """Last: it kills the module's upstream (twice: it is started again in between)."""
    with pytest.raises(anthropic.APIError, match="upstream 'box'.*mid-answer"):
        with claude(servers["url"]).messages.stream(
            model=ALIAS,
            max_tokens=400,
            messages=STORY,
        ) as stream:
            for i, _ in enumerate(stream):
                if i == 4:
                    kill(servers["llama"])
    with pytest.raises(openai.InternalServerError, match="upstream 'box'"):
        oai(servers["url"]).responses.create(model=ALIAS, input="Hi", max_output_tokens=4)
    servers["llama"] = start_llama_server(servers["port"])
    deadline = time.monotonic() + 30
    while _state(servers["url"], "box") != "up":
        assert time.monotonic() < deadline, "the restarted upstream was not used again"
        time.sleep(0.5)
    kinds, failed = [], None
    for i, event in enumerate(
        oai(servers["url"]).responses.create(
            model=ALIAS, input=STORY, max_output_tokens=400, stream=True
        )
    ):
        kinds.append(event.type)
        if i == 4:
            kill(servers["llama"])
        if event.type == "response.failed":
            failed = event.response
    assert kinds[0] == "response.created" and kinds[-1] == "response.failed", kinds
    assert failed is not None and failed.status == "failed"
    assert failed.error is not None and "upstream 'box'" in failed.error.message
