"""Upstream failures against real servers on loopback (docs/upstreams.md): an upstream killed
mid-answer and started again, one down when the daemon starts, and one that redirects
elsewhere (the key must not follow)."""

from __future__ import annotations

import http.server
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import ollama
import openai
import pytest

from tests.support.daemons import HOST, free_port, log_text, stop_daemon
from tests.support.helpers import NO_END
from tests.support.live import CLIENT_TIMEOUT_S, start_daemon
from tests.support.upstream_support import (
    ALIAS,
    ASK,
    KEY,
    STORY,
    configure,
    get,
    kill,
    oai,
    start_llama_server,
)


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


def test_an_upstream_down_at_start_keeps_its_named_models_listed_and_503s(
    tmp_path: Path,
) -> None:
    """Named models are listed before the upstream ever answered; a request to one gets a 503
    naming the upstream in each face's shape, at once (a refused connection), not a 404."""
    port = free_port()  # nothing listens there
    config = tmp_path / "config.toml"
    add = [sys.executable, "-m", "localserve", "upstream", "add", "ghost"]
    add += [f"http://{HOST}:{port}/v1", "--models", "big-model"]
    subprocess.run(add, env={**os.environ, "LOCALSERVE_CONFIG": str(config)}, check=True)
    started = time.monotonic()
    proc, url = start_daemon(["--no-default-model"], env={"LOCALSERVE_CONFIG": str(config)})
    try:
        assert time.monotonic() - started < 30
        models = {m.id: m for m in oai(url).models.list().data}
        assert models["big-model"].owned_by == "upstream:ghost"
        with pytest.raises(openai.InternalServerError, match="upstream 'ghost'") as exc:
            oai(url).chat.completions.create(model="big-model", messages=ASK)
        assert exc.value.status_code == 503 and exc.value.code == "upstream_unavailable"
        with pytest.raises(ollama.ResponseError, match="upstream 'ghost'.*cannot connect"):
            ollama.Client(host=url).chat(model="big-model", messages=ASK, stream=True).__next__()
    finally:
        stop_daemon(proc)


class _Recorder(http.server.BaseHTTPRequestHandler):
    """A server that only records the Authorization header of what reaches it."""

    seen: list[str | None] = []

    def do_GET(self) -> None:
        self._answer()

    def do_POST(self) -> None:
        self._answer()

    def _answer(self) -> None:
        self.seen.append(self.headers.get("Authorization"))
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(b'{"object": "list", "data": [{"id": "m"}]}')

    def log_message(self, *args: object) -> None:
        pass


def test_the_key_never_follows_a_redirect_to_another_host(tmp_path: Path) -> None:
    """An upstream that redirects elsewhere: the key goes to its URL only, never where it
    points (here, another server on loopback that records what reaches it)."""
    elsewhere = http.server.ThreadingHTTPServer((HOST, 0), _Recorder)
    target = f"http://{HOST}:{elsewhere.server_address[1]}"

    class Redirect(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self._answer()

        def do_POST(self) -> None:
            self._answer()

        def _answer(self) -> None:
            self.send_response(307)
            self.send_header("Location", target + self.path)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    redirect = http.server.ThreadingHTTPServer((HOST, 0), Redirect)
    for server in (elsewhere, redirect):
        threading.Thread(target=server.serve_forever, daemon=True).start()
    config = tmp_path / "config.toml"
    upstream_url = f"http://{HOST}:{redirect.server_address[1]}/v1"
    add = [sys.executable, "-m", "localserve", "upstream", "add", "moved", upstream_url]
    add += ["--key-env", "UPSTREAM_KEY", "--models", "m"]
    subprocess.run(add, env={**os.environ, "LOCALSERVE_CONFIG": str(config)}, check=True)
    env = {"LOCALSERVE_CONFIG": str(config), "UPSTREAM_KEY": KEY}
    proc, url = start_daemon(["--no-default-model", "--verbose"], env=env)
    try:
        with pytest.raises(openai.InternalServerError, match="redirect") as exc:
            oai(url).chat.completions.create(model="m", messages=ASK)
        assert "upstream 'moved'" in exc.value.message
    finally:
        stop_daemon(proc)
        redirect.shutdown()
        elsewhere.shutdown()
    assert _Recorder.seen == []
    assert KEY not in log_text(proc.log_path)


def test_an_upstream_that_does_not_answer_in_time_gets_a_503_naming_it(tmp_path: Path) -> None:
    """An upstream that takes the connection and never answers (a socket that listens and
    says nothing: the kernel completes the handshake): past `upstream_first_byte_timeout`, a
    503 naming it, on both faces."""
    silent = socket.socket()
    silent.bind((HOST, 0))
    silent.listen(16)
    config = tmp_path / "config.toml"
    silent_url = f"http://{HOST}:{silent.getsockname()[1]}/v1"
    add = [sys.executable, "-m", "localserve", "upstream", "add", "mute", silent_url]
    env = {**os.environ, "LOCALSERVE_CONFIG": str(config)}
    subprocess.run([*add, "--models", "m"], env=env, check=True)
    args = ["--no-default-model", "--upstream-first-byte-timeout", "1"]
    proc, url = start_daemon(args, env={"LOCALSERVE_CONFIG": str(config)})
    try:
        started = time.monotonic()
        with pytest.raises(openai.InternalServerError, match="upstream 'mute'.*timed out") as exc:
            oai(url).chat.completions.create(model="m", messages=ASK)
        assert exc.value.status_code == 503
        assert time.monotonic() - started < 10
        with pytest.raises(ollama.ResponseError, match="upstream 'mute'") as down:
            ollama.Client(host=url).chat(model="m", messages=ASK)
        assert down.value.status_code == 503
    finally:
        stop_daemon(proc)
        silent.close()


NESTED = b"[" * 100_000 + b"]" * 100_000  # deeper than Python's decoder goes unaided


class _Nested(http.server.BaseHTTPRequestHandler):
    """An upstream that lists its model, and whose every answer nests JSON 100,000 deep."""

    listing = b'{"object": "list", "data": [{"id": "m"}]}'

    def do_GET(self) -> None:
        self._answer(self.listing)

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers["Content-Length"]))
        self._answer(NESTED)

    def _answer(self, body: bytes) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


def _serving(
    handler: type[http.server.BaseHTTPRequestHandler], tmp_path: Path, *args: str
) -> tuple[http.server.ThreadingHTTPServer, subprocess.Popen[bytes], str]:
    """The handler as the upstream `deep` (model `m`), and a daemon configured with it (and
    `args`)."""
    upstream = http.server.ThreadingHTTPServer((HOST, 0), handler)
    threading.Thread(target=upstream.serve_forever, daemon=True).start()
    config = tmp_path / "config.toml"
    add = [sys.executable, "-m", "localserve", "upstream", "add", "deep"]
    add += [f"http://{HOST}:{upstream.server_address[1]}/v1", "--models", "m"]
    subprocess.run(add, env={**os.environ, "LOCALSERVE_CONFIG": str(config)}, check=True)
    env = {"LOCALSERVE_CONFIG": str(config)}
    proc, url = start_daemon(["--no-default-model", *args], env=env)
    return upstream, proc, url


def test_an_upstream_answer_nested_too_deep_is_a_503_naming_it(tmp_path: Path) -> None:
    nested, proc, url = _serving(_Nested, tmp_path)
    try:
        with pytest.raises(ollama.ResponseError, match="upstream 'deep'") as exc:
            ollama.Client(host=url).chat(model="m", messages=ASK)
        assert exc.value.status_code == 503
        with pytest.raises(ollama.ResponseError, match="upstream 'deep'"):
            ollama.Client(host=url).generate(model="m", prompt="Hi")
        assert get(f"{url}/health")["status"] == "ok"
    finally:
        stop_daemon(proc)
        nested.shutdown()


class _NestedListing(_Nested):
    listing = NESTED


def test_an_upstream_listing_nested_too_deep_counts_as_its_failure_and_says_why(
    tmp_path: Path,
) -> None:
    nested, proc, url = _serving(_NestedListing, tmp_path)
    try:
        (upstream,) = get(f"{url}/health")["upstreams"]  # the first probe answered by now
        assert upstream["failures"] >= 1
        assert "deeper than" in upstream["last_error"]
        assert get(f"{url}/health")["status"] == "ok"
    finally:
        stop_daemon(proc)
        nested.shutdown()


class _TextCreated(_Nested):
    """An upstream whose listing dates its model with text, and that counts its probes."""

    listing = b'{"data": [{"id": "m", "created": "yesterday", "context_length": 4096}]}'
    probes = 0

    def do_GET(self) -> None:
        type(self).probes += 1
        super().do_GET()


def test_a_listing_whose_created_is_text_is_read_and_the_probes_go_on(tmp_path: Path) -> None:
    upstream, proc, url = _serving(_TextCreated, tmp_path, "--upstream-probe-interval", "0.2")
    try:
        deadline = time.monotonic() + 10
        while _TextCreated.probes < 3:
            assert time.monotonic() < deadline, "the probe loop stopped after the first listing"
            time.sleep(0.1)
        (entry,) = [m for m in get(f"{url}/v1/models")["data"] if m["id"] == "m"]
        assert entry["context_length"] == 4096
        assert get(f"{url}/health")["upstreams"][0]["failures"] == 0
    finally:
        stop_daemon(proc)
        upstream.shutdown()
