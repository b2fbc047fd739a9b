"""Upstream models against real servers on loopback (docs/upstreams.md): llama-cpp-python's own
OpenAI server (`python -m llama_cpp.server`, its `server` extra) serving the embedded SmolLM2
as `smol-up` behind a key, and a second localserve daemon as a second upstream. The daemon
under test reads both from its config.toml and takes the key from `$UPSTREAM_KEY`; the
official `openai` and `ollama` clients talk to it, unmodified. Failures (a killed upstream, one
down at start, a redirect) are in test_upstream_failures.py.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

import ollama
import openai
import pytest

from tests.support import daemons
from tests.support.daemons import HOST, free_port, log_text, stop_daemon
from tests.support.helpers import NO_END
from tests.support.live import CLIENT_TIMEOUT_S, start_daemon
from tests.support.upstream_support import (
    ALIAS,
    ASK,
    KEY,
    STORY,
    WEATHER,
    configure,
    get,
    kill,
    localserve_cli,
    oai,
    start_llama_server,
)


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """The upstreams (llama.cpp's server, a second localserve) and the daemon under test."""
    port = free_port()
    llama = start_llama_server(port)
    peer, peer_url = start_daemon(["--model", "smollm2", "--parallel", "2", "--ctx", "1024"])
    config = tmp_path_factory.mktemp("upstreams") / "config.toml"
    env = configure(config, {"box": f"http://{HOST}:{port}", "peer": f"{peer_url}/v1"})
    args = ["--no-default-model", "--upstream-probe-interval", "1", "--verbose"]
    proc, url = start_daemon(args, env=env)
    try:
        yield {
            "url": url,
            "log": proc.log_path,
            "box": f"http://{HOST}:{port}/v1",
            "config": env["LOCALSERVE_CONFIG"],
        }
    finally:
        stop_daemon(proc)
        stop_daemon(peer)
        kill(llama)
        log = log_text(proc.log_path)
        assert KEY not in log, "the upstream's key is in the daemon's log"


def test_upstream_models_are_listed_on_both_faces_marked_remote(servers: dict[str, str]) -> None:
    models = {m.id: m for m in oai(servers["url"]).models.list().data}
    assert models[ALIAS].owned_by == "upstream:box"
    assert models[ALIAS].model_extra["remote"]["url"] == servers["box"]
    # The peer's smollm2 has the local one's name: it is listed, and reached, as smollm2@peer.
    assert models["smollm2"].owned_by == "localserve"
    assert models["smollm2@peer"].owned_by == "upstream:peer"
    assert models["smollm2@peer"].model_extra["context_length"] == 1024
    tags = {m.model: m for m in ollama.Client(host=servers["url"]).list().models}
    assert {ALIAS, "smollm2@peer", "smollm2:latest"} <= set(tags)
    assert tags[ALIAS].size == 0 and tags[ALIAS].details.format == "remote"
    shown = ollama.Client(host=servers["url"]).show("smollm2@peer")
    assert shown.modelinfo["remote.context_length"] == 1024 and "tools" in shown.capabilities
    with daemons.OPENER.open(f"{servers['url']}/metrics", timeout=10) as r:
        metrics = r.read().decode()
    assert 'localserve_upstream_up{upstream="box"} 1.0' in metrics
    assert 'localserve_upstream_up{upstream="peer"} 1.0' in metrics
    health = {u["name"]: u for u in get(f"{servers['url']}/health")["upstreams"]}
    assert health["box"]["state"] == "up" and health["box"]["models"] == [ALIAS]
    listed = localserve_cli("list", servers["url"])
    assert any(ALIAS in line and "remote: box" in line for line in listed.splitlines())
    rows = localserve_cli("upstream", servers["url"], "list", config=servers["config"])
    box = next(line.split() for line in rows.splitlines() if line.startswith("box "))
    assert box == ["box", servers["box"], "all", "it", "lists", "$UPSTREAM_KEY", "up"]


@pytest.mark.parametrize("model", [ALIAS, "smollm2@peer"])
def test_openai_chat_streamed_and_not(servers: dict[str, str], model: str) -> None:
    client = oai(servers["url"])
    answer = client.chat.completions.create(model=model, messages=ASK, max_tokens=8)
    assert answer.model == model and answer.choices[0].message.content
    assert answer.usage is not None and answer.usage.completion_tokens > 0
    text = ""
    for chunk in client.chat.completions.create(
        model=model, messages=ASK, max_tokens=8, stream=True
    ):
        assert chunk.model == model
        if chunk.choices and chunk.choices[0].delta.content:
            text += chunk.choices[0].delta.content
    assert text
    legacy = client.completions.create(model=model, prompt="Once upon a time", max_tokens=4)
    assert legacy.model == model and legacy.choices[0].text


def test_tools_pass_through_with_tool_choice(servers: dict[str, str]) -> None:
    answer = oai(servers["url"]).chat.completions.create(
        model=ALIAS,
        messages=[{"role": "user", "content": "What is the weather in Paris?"}],
        tools=[WEATHER],
        tool_choice={"type": "function", "function": {"name": "get_weather"}},
        max_tokens=40,
    )
    call = answer.choices[0].message.tool_calls[0]
    assert call.function.name == "get_weather"
    assert "city" in json.loads(call.function.arguments)
    # Streamed: the call's deltas are relayed as the upstream sent them.
    name, arguments = "", ""
    for chunk in oai(servers["url"]).chat.completions.create(
        model=ALIAS,
        messages=[{"role": "user", "content": "What is the weather in Paris?"}],
        tools=[WEATHER],
        tool_choice={"type": "function", "function": {"name": "get_weather"}},
        max_tokens=40,
        stream=True,
    ):
        for delta in (chunk.choices[0].delta.tool_calls or []) if chunk.choices else []:
            name = name or (delta.function.name or "")
            arguments += delta.function.arguments or ""
    assert name == "get_weather" and "city" in json.loads(arguments)


def test_response_format_passes_through_and_its_refusal_comes_back(
    servers: dict[str, str],
) -> None:
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
    ask = [{"role": "user", "content": "Give a JSON object with a small number n."}]
    # llama-cpp-python's server takes a schema as json_object's `schema` (its own extension).
    answer = oai(servers["url"]).chat.completions.create(
        model=ALIAS,
        messages=ask,
        response_format={"type": "json_object", "schema": schema},  # type: ignore[typeddict-unknown-key]
        max_tokens=60,
        temperature=0,
    )
    assert isinstance(json.loads(answer.choices[0].message.content or "")["n"], int)
    # OpenAI's json_schema it refuses: its refusal, status and words, comes back as it said it.
    with pytest.raises(openai.APIStatusError) as exc:
        oai(servers["url"]).chat.completions.create(
            model=ALIAS,
            messages=ask,
            response_format={"type": "json_schema", "json_schema": {"name": "n", "schema": schema}},
            max_tokens=8,
        )
    assert exc.value.status_code == 500 and "json_object" in exc.value.message


def test_the_upstreams_4xx_comes_back_as_is(servers: dict[str, str]) -> None:
    with pytest.raises(openai.BadRequestError) as exc:
        oai(servers["url"]).chat.completions.create(
            model=ALIAS, messages=[{"role": "user", "content": "word " * 3000}], max_tokens=8
        )
    assert exc.value.status_code == 400
    assert exc.value.code == "context_length_exceeded"
    assert "2048" in exc.value.message  # llama.cpp's server's own words


def test_ollama_chat_streamed_and_not(servers: dict[str, str]) -> None:
    client = ollama.Client(host=servers["url"], timeout=CLIENT_TIMEOUT_S)
    options = {"num_predict": 8, "temperature": 0}
    answer = client.chat(model=ALIAS, messages=ASK, options=options)
    assert answer.message.content and answer.done and answer.done_reason == "length"
    chunks = list(client.chat(model=ALIAS, messages=ASK, options=options, stream=True))
    assert "".join(c.message.content or "" for c in chunks)
    assert chunks[-1].done and not any(c.done for c in chunks[:-1])
    said = client.generate(model="smollm2@peer", prompt="Say hello.", options=options)
    assert said.response and said.done
    # Tools reach the upstream (SmolLM2 may answer in words: Ollama has no tool_choice).
    tooled = client.chat(model=ALIAS, messages=ASK, tools=[WEATHER], options=options)
    assert tooled.done
    # A conversation with a call and its result, in Ollama's shape (no ids), reaches the
    # upstream as OpenAI's (ids that match) and is answered.
    history = [
        {"role": "user", "content": "What is the weather in Paris?"},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [{"function": {"name": "get_weather", "arguments": {"city": "Paris"}}}],
        },
        {"role": "tool", "content": "sunny, 21 C", "tool_name": "get_weather"},
    ]
    followed = client.chat(model=ALIAS, messages=history, tools=[WEATHER], options=options)
    assert followed.done and followed.message.content


def test_embeddings_on_both_faces(servers: dict[str, str]) -> None:
    """Through the peer, a localserve daemon that embeds with its model."""
    got = oai(servers["url"]).embeddings.create(model="smollm2@peer", input=["a", "b"])
    assert got.model == "smollm2@peer" and len(got.data) == 2 and len(got.data[0].embedding) > 8
    embedded = ollama.Client(host=servers["url"]).embed(model="smollm2@peer", input="a")
    assert len(embedded.embeddings) == 1
    assert embedded.embeddings[0] == pytest.approx(got.data[0].embedding, abs=1e-4)


def test_an_ollama_option_without_an_openai_field_is_a_400(servers: dict[str, str]) -> None:
    client = ollama.Client(host=servers["url"], timeout=CLIENT_TIMEOUT_S)
    with pytest.raises(ollama.ResponseError) as exc:
        client.chat(model=ALIAS, messages=ASK, options={"mirostat": 1})
    assert exc.value.status_code == 400 and "mirostat" in exc.value.error


def test_ps_lists_an_upstream_model_only_while_a_request_is_in_flight(
    servers: dict[str, str],
) -> None:
    ps = f"{servers['url']}/api/ps"
    assert ALIAS not in [m["name"] for m in get(ps)["models"]]
    # Long enough (about 4 s here) for the checks below to run while it is in flight.
    stream = oai(servers["url"]).chat.completions.create(
        model=ALIAS, messages=STORY, max_tokens=200, stream=True, logit_bias=NO_END
    )
    next(iter(stream))
    listed = {m["name"]: m for m in get(ps)["models"]}
    assert listed[ALIAS]["size"] == 0 and listed[ALIAS]["size_vram"] == 0
    row = next(line for line in localserve_cli("ps", servers["url"]).splitlines() if ALIAS in line)
    assert "remote:box" in row
    for _ in stream:
        pass
    deadline = time.monotonic() + 10
    while ALIAS in [m["name"] for m in get(ps)["models"]]:
        assert time.monotonic() < deadline, "still in /api/ps after its request ended"
        time.sleep(0.2)
