"""Upstream models against real servers on loopback (docs/upstreams.md): llama-cpp-python's own
OpenAI server (`python -m llama_cpp.server`, its `server` extra) serving the embedded SmolLM2
as `smol-up` behind a key, and a second localserve daemon as a second upstream. The daemon
under test reads both from its config.toml and takes the key from `$UPSTREAM_KEY`; the
official `openai` and `ollama` clients talk to it, unmodified.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import ollama
import openai
import pytest

from localserve.store.resolve import resolve
from tests.support import daemons
from tests.support.daemons import HOST, free_port, log_text, stop_daemon, wait_ready
from tests.support.live import CLIENT_TIMEOUT_S, start_daemon

KEY = "sekrit-123"
ALIAS = "smol-up"
WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The weather in a city",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
    },
}
ASK = [{"role": "user", "content": "Say hello."}]
# An answer long enough to be cut: SmolLM2 tells a story, and its end-of-turn tokens are banned
# (logit_bias, which passes through to the upstream) where the face has the field.
STORY = [{"role": "user", "content": "Write a long story about a dragon and a knight."}]
NO_END = {"0": -100, "2": -100}


def start_llama_server(port: int) -> subprocess.Popen:
    """llama-cpp-python's server on `port`, the embedded SmolLM2 as `smol-up`, behind KEY."""
    model = resolve("smollm2").path
    cmd = [
        sys.executable,
        "-m",
        "llama_cpp.server",
        "--model",
        str(model),
        "--model_alias",
        ALIAS,
        "--host",
        HOST,
        "--port",
        str(port),
        "--api_key",
        KEY,
        "--n_ctx",
        "2048",
        "--n_threads",
        "1",
        # By default it stops the answer in progress when any request arrives, /v1/models
        # included: the probe would cut every stream short.
        "--interrupt_requests",
        "False",
    ]
    fd, log_path = tempfile.mkstemp(prefix=f"llama-server-{port}-", suffix=".log")
    with os.fdopen(fd, "wb") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    proc.log_path = log_path  # type: ignore[attr-defined]

    def ready() -> bool:
        request = urllib.request.Request(
            f"http://{HOST}:{port}/v1/models", headers={"Authorization": f"Bearer {KEY}"}
        )
        try:
            with daemons.OPENER.open(request, timeout=2) as r:
                return bool(r.status == 200)
        except OSError:
            return False

    try:
        wait_ready(proc, ready, cmd, log_path, timeout_s=90)
    except daemons.NotReady as exc:
        pytest.fail(f"llama_cpp.server {exc.reason}\n{exc.log}", pytrace=False)
    return proc


def kill(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)


def configure(path: Path, upstreams: dict[str, str]) -> dict[str, str]:
    """A config file naming the upstreams, and the environment a daemon reads it from."""
    for name, url in upstreams.items():
        key = ["--key-env", "UPSTREAM_KEY"] if name == "box" else []
        cli = [sys.executable, "-m", "localserve", "upstream", "add", name, url, *key]
        subprocess.run(cli, env={**os.environ, "LOCALSERVE_CONFIG": str(path)}, check=True)
    return {"LOCALSERVE_CONFIG": str(path), "UPSTREAM_KEY": KEY}


def localserve_cli(command: str, url: str) -> str:
    port = url.rsplit(":", 1)[1]
    cmd = [sys.executable, "-m", "localserve", command, "--port", port]
    return subprocess.run(cmd, capture_output=True, text=True, check=True).stdout


def get(url: str) -> dict:
    with daemons.OPENER.open(url, timeout=10) as r:
        return json.loads(r.read())


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
        yield {"url": url, "log": proc.log_path, "box": f"http://{HOST}:{port}/v1"}
    finally:
        stop_daemon(proc)
        stop_daemon(peer)
        kill(llama)
        log = log_text(proc.log_path)
        assert KEY not in log, "the upstream's key is in the daemon's log"


def oai(url: str) -> openai.OpenAI:
    return openai.OpenAI(
        base_url=f"{url}/v1", api_key="none", timeout=CLIENT_TIMEOUT_S, max_retries=0
    )


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
    health = {u["name"]: u for u in get(f"{servers['url']}/health")["upstreams"]}
    assert health["box"]["state"] == "up" and health["box"]["models"] == [ALIAS]
    listed = localserve_cli("list", servers["url"])
    assert any(ALIAS in line and "remote: box" in line for line in listed.splitlines())


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


def test_a_killed_upstream_gives_an_error_event_then_503s_and_is_used_again_once_back(
    tmp_path: Path,
) -> None:
    port = free_port()
    llama = start_llama_server(port)
    env = configure(tmp_path / "config.toml", {"box": f"http://{HOST}:{port}/v1"})
    args = ["--no-default-model", "--upstream-failures", "1", "--upstream-retry", "2"]
    args += ["--upstream-probe-interval", "1", "--verbose"]
    proc, url = start_daemon(args, env=env)
    try:
        client = oai(url)
        stream = client.chat.completions.create(
            model=ALIAS, messages=STORY, max_tokens=400, stream=True, logit_bias=NO_END
        )
        with pytest.raises(openai.APIError, match="upstream 'box'.*mid-answer"):
            for i, _ in enumerate(stream):
                if i == 2:
                    kill(llama)
        with pytest.raises(openai.InternalServerError, match="upstream 'box'") as exc:
            client.chat.completions.create(model=ALIAS, messages=ASK, max_tokens=4)
        assert exc.value.status_code == 503
        with pytest.raises(ollama.ResponseError, match="upstream 'box'") as down:
            ollama.Client(host=url).chat(model=ALIAS, messages=ASK)
        assert down.value.status_code == 503
        assert get(f"{url}/health")["upstreams"][0]["state"] != "up"

        llama = start_llama_server(port)  # back, on the same address
        deadline = time.monotonic() + 20  # the breaker's 2 s, the probe's 1 s, and slack
        while True:
            try:
                answer = client.chat.completions.create(model=ALIAS, messages=ASK, max_tokens=4)
                break
            except openai.InternalServerError:
                assert time.monotonic() < deadline, "the restarted upstream was not used again"
                time.sleep(0.5)
        assert answer.choices[0].message.content

        # The same on Ollama's face: an {"error": ...} line that ollama's client raises.
        chunks = ollama.Client(host=url, timeout=CLIENT_TIMEOUT_S).chat(
            model=ALIAS, messages=STORY, options={"num_predict": 400}, stream=True
        )
        with pytest.raises(ollama.ResponseError, match="upstream 'box'"):
            for i, _ in enumerate(chunks):
                if i == 2:
                    kill(llama)
    finally:
        stop_daemon(proc)
        kill(llama)
    assert KEY not in log_text(proc.log_path)
