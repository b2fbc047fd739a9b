"""A stream that ends without its final event is an error, never a silent success: the client
against a stand-in daemon on 127.0.0.1 that sends a few events and closes (no model, fast),
and `localserve run` in front of it, one answer and the chat."""

from __future__ import annotations

import json
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pexpect
import pytest

from localserve.client import Client, StreamCutOff
from tests.support.cli_support import cli_env, default_sigint, localserve, log_file


def sse(payload: Any) -> bytes:
    return b"data: " + (payload if isinstance(payload, bytes) else json.dumps(payload).encode())


def chunk(content: str | None = None, finish: str | None = None) -> bytes:
    delta = {} if content is None else {"content": content}
    return sse({"choices": [{"index": 0, "delta": delta, "finish_reason": finish}], "usage": None})


USAGE = sse({"choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 2}})
DONE = sse(b"[DONE]")
WHOLE = [chunk("Hello"), chunk(" there"), chunk(finish="stop"), USAGE, DONE]
CUT = [chunk("Hello"), chunk(" there")]


class FakeDaemon:
    """/health, /api/show and /api/admin/load answer; a chat or pull request gets `lines`, and
    then the connection closes: with HTTP/1.0 at a clean end of the body, with chunked
    encoding in the middle of it (no last chunk), as a daemon that died leaves it."""

    def __init__(self, lines: list[bytes], chunked: bool = False, then_exit: bool = False) -> None:
        self.lines = lines
        self.chunked = chunked
        self.then_exit = then_exit  # stop listening once a stream was cut: the daemon is gone
        self.bodies: list[dict[str, Any]] = []
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1" if chunked else "HTTP/1.0"

            def log_message(self, *args: object) -> None:
                pass

            def do_GET(self) -> None:
                self._json({"status": "ok", "models": []})

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])) or b"{}")
                if self.path in ("/v1/chat/completions", "/api/pull"):
                    fake.bodies.append(body)
                    self._stream()
                else:
                    self._json({})

            def _json(self, value: dict[str, Any]) -> None:
                raw = json.dumps(value).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

            def _stream(self) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                if fake.chunked:
                    self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                for line in fake.lines:
                    # An SSE event ends at a blank line; `event:` and NDJSON lines do not.
                    data = line + (b"\n\n" if line.startswith(b"data:") else b"\n")
                    if fake.chunked:
                        data = b"%x\r\n%s\r\n" % (len(data), data)
                    self.wfile.write(data)
                    self.wfile.flush()
                self.close_connection = True
                if fake.then_exit:
                    threading.Thread(target=fake.stop).start()

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def fake_daemon() -> Iterator[Any]:
    started: list[FakeDaemon] = []

    def start(lines: list[bytes], **kwargs: Any) -> FakeDaemon:
        started.append(FakeDaemon(lines, **kwargs))
        return started[-1]

    yield start
    for fake in started:
        if fake.server.socket.fileno() != -1:
            fake.stop()


def answer(url: str) -> list[dict[str, Any]]:
    return list(Client(url, timeout=10).chat({"model": "m", "messages": []}))


def test_a_whole_stream_yields_every_event(fake_daemon):
    events = answer(fake_daemon(WHOLE).url)
    assert [e["choices"][0]["delta"].get("content") for e in events[:2]] == ["Hello", " there"]
    assert events[-1]["usage"]["completion_tokens"] == 2


@pytest.mark.parametrize("chunked", [False, True], ids=["closed-at-an-event", "closed-mid-body"])
def test_a_stream_closed_before_its_end_is_cut_off(fake_daemon, chunked):
    with pytest.raises(StreamCutOff) as cut:
        answer(fake_daemon(CUT, chunked=chunked).url)
    assert str(cut.value) == (
        "the answer was cut off: the daemon closed the connection before the answer ended"
    )


@pytest.mark.parametrize(
    ("lines", "reason"),
    [
        ([chunk("Hi"), USAGE, DONE], "the stream ended without a finish reason"),
        ([chunk("Hi"), chunk(finish="stop"), DONE], "the stream ended without the usage"),
        (
            [chunk("Hi"), sse({"error": {"message": "the engine failed", "type": "x"}}), DONE],
            "the daemon reported an error: the engine failed",
        ),
        (
            [chunk("Hi"), b"event: error", sse(b"out of memory")],
            "the daemon reported an error: out of memory",
        ),
    ],
    ids=["no-finish-reason", "no-usage", "error-object", "error-event"],
)
def test_a_stream_without_its_final_events_or_with_an_error_is_cut_off(fake_daemon, lines, reason):
    with pytest.raises(StreamCutOff) as cut:
        answer(fake_daemon(lines).url)
    assert cut.value.reason == reason


def test_a_pull_whose_progress_ends_without_success_is_cut_off(fake_daemon):
    url = fake_daemon([b'{"status": "pulling manifest"}', b'{"status": "downloading"}']).url
    with pytest.raises(StreamCutOff, match="the download was cut off"):
        list(Client(url, timeout=10).pull("m"))
    done = fake_daemon([b'{"status": "pulling manifest"}', b'{"status": "success"}']).url
    assert list(Client(done, timeout=10).pull("m"))[-1] == {"status": "success"}


def test_pull_exits_1_when_the_progress_stops_before_success(tmp_path, fake_daemon):
    fake = fake_daemon([b'{"status": "pulling manifest"}'])
    done = localserve("pull", "m", env=cli_env(tmp_path, fake.url), timeout=60)
    assert done.returncode == 1
    assert "the download was cut off: the daemon closed the connection" in done.stderr


def test_run_exits_1_naming_the_cut_off_and_the_log_when_an_answer_stops_short(
    tmp_path, fake_daemon
):
    fake = fake_daemon(CUT)
    env = cli_env(tmp_path, fake.url)
    log_file(env).parent.mkdir(parents=True)
    log_file(env).write_text("a daemon's log\n")
    done = localserve("run", "m", "--verbose", "Say hello.", env=env, timeout=60)
    assert done.returncode == 1, done.stderr
    assert "the answer was cut off: the daemon closed the connection" in done.stderr
    assert f"(see the log: {log_file(env)})" in done.stderr
    assert done.stdout == "Hello there", "the text so far, with no end of answer added"
    assert "total duration" not in done.stderr, "no timings for an answer that did not end"


def spawn_chat(env: dict[str, str]) -> pexpect.spawn:
    child = pexpect.spawn(
        sys.executable,
        ["-m", "localserve", "run", "m"],
        env=env,
        encoding="utf-8",
        timeout=60,
        dimensions=(50, 200),
        preexec_fn=default_sigint,
    )
    child.expect_exact(">>> ")
    return child


def test_the_chat_drops_a_cut_off_turn_and_goes_on_while_the_daemon_answers(tmp_path, fake_daemon):
    fake = fake_daemon(CUT)
    child = spawn_chat(cli_env(tmp_path, fake.url))
    try:
        child.sendline("First question")
        child.expect_exact("the answer was cut off")
        child.expect_exact(">>> ")
        child.sendline("Second question")
        child.expect_exact("the answer was cut off")
        child.expect_exact(">>> ")
        assert [m["content"] for m in fake.bodies[-1]["messages"]] == ["Second question"]
        child.sendline("/bye")
        child.expect(pexpect.EOF)
    finally:
        child.close(force=True)
    assert child.exitstatus == 0


def test_the_chat_exits_1_when_the_daemon_is_gone_after_a_cut_off(tmp_path, fake_daemon):
    fake = fake_daemon(CUT, chunked=True, then_exit=True)
    child = spawn_chat(cli_env(tmp_path, fake.url))
    try:
        child.sendline("A question")
        child.expect_exact("the answer was cut off")
        child.expect_exact(f"the daemon at {fake.url} no longer answers")
        child.expect(pexpect.EOF)
    finally:
        child.close(force=True)
    assert child.exitstatus == 1
