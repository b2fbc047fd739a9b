"""What the upstream tests share (tests/live/test_upstreams.py and test_upstream_failures.py):
llama-cpp-python's own OpenAI server started on loopback, a config file written by `localserve
upstream add`, and the clients' small calls."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import urllib.request
from pathlib import Path

import openai
import pytest

from localserve.store.resolve import resolve
from tests.support import daemons
from tests.support.daemons import HOST, wait_ready
from tests.support.live import CLIENT_TIMEOUT_S

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
# (NO_END as logit_bias, which passes through to the upstream) where the face has the field.
STORY = [{"role": "user", "content": "Write a long story about a dragon and a knight."}]


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


def localserve_cli(command: str, url: str, *more: str, config: str | None = None) -> str:
    port = url.rsplit(":", 1)[1]
    cmd = [sys.executable, "-m", "localserve", command, *more, "--port", port]
    env = {**os.environ, "LOCALSERVE_CONFIG": config} if config else None
    return subprocess.run(cmd, capture_output=True, text=True, check=True, env=env).stdout


def get(url: str) -> dict:
    with daemons.OPENER.open(url, timeout=10) as r:
        return json.loads(r.read())


def oai(url: str) -> openai.OpenAI:
    return openai.OpenAI(
        base_url=f"{url}/v1", api_key="none", timeout=CLIENT_TIMEOUT_S, max_retries=0
    )
