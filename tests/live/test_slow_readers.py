"""Slow readers give way (#57): a connection whose client reads none of its answer (a stream
or a download) while the output waits is closed after `write_timeout`, its generation cancelled
and its slot free for the next client; under pressure it gives way to a new connection sooner,
the longest unread first (server/http/connections.py, "Slow readers")."""

from __future__ import annotations

import json
import select
import socket
import time
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from tests.live.test_connections import in_flight, release, sequences
from tests.live.test_limits import chat
from tests.support.daemons import log_text, raw_request
from tests.support.helpers import MODEL, NO_END
from tests.support.live import running_daemon

# A generation as long as a slot's context (its end tokens banned), streamed: some 400 KB, far
# more than the buffers hold.
STREAM = json.dumps(
    {
        "model": MODEL,
        "messages": [{"role": "user", "content": "Count to 100000."}],
        "stream": True,
        "logit_bias": NO_END,
    }
).encode()


def non_reader(url: str, head: bytes) -> socket.socket:
    """A connection that sends a request and reads none of its answer. Its receive window and
    segments are small, so the daemon's output is held back after some 80 KB, not after the
    megabytes loopback's buffers take otherwise."""
    host, port = url.removeprefix("http://").split(":")
    s = socket.socket()
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_MAXSEG, 88)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1024)
    s.settimeout(10)
    s.connect((host, int(port)))
    s.sendall(head)
    return s


def stream_request(body: bytes = STREAM) -> bytes:
    return (
        b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: "
        b"application/json\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body)
    )


def gone(s: socket.socket, within_s: float = 2.0) -> bool:
    """Whether the daemon has closed `s`, read none of its answer: a byte sent is answered
    by a reset. (The daemon's own reset is not seen: it falls outside a closed window.)"""
    try:
        s.send(b"\r\n")  # before a request's head, a blank line is skipped (RFC 9112, 2.2)
    except OSError:
        return True
    poller = select.poll()
    poller.register(s, select.POLLERR | select.POLLHUP | select.POLLRDHUP)
    return bool(poller.poll(within_s * 1000))


def closed_by(s: socket.socket, within_s: float) -> float | None:
    """Seconds until the daemon closed `s`, asked every half second; None if it kept it."""
    started = time.monotonic()
    while time.monotonic() - started < within_s:
        if gone(s, 0.5):
            return time.monotonic() - started
    return None


def freed_within(url: str, within_s: float) -> float | None:
    """Seconds until no sequence is running or queued; None if some still are after
    `within_s`."""
    started = time.monotonic()
    while sequences(url):
        if time.monotonic() - started > within_s:
            return None
        time.sleep(0.1)
    return time.monotonic() - started


@dataclass
class CutStream:
    url: str
    log_path: str
    closed_s: float | None  # until the daemon closed the non-reader's connection
    freed_s: float | None  # from then until its generation's slot was free


@pytest.fixture(scope="module")
def cut_stream() -> Iterator[CutStream]:
    """A daemon of one generation slot whose answers may sit unread for a second, and a stream
    its client reads none of, kept until the daemon closes it. Once for the module: the
    buffers take some 400 tokens to fill, a minute or more on a loaded machine."""
    args = [*("--model", MODEL, "--parallel", "1", "--ctx", "2048"), "--write-timeout", "1"]
    with running_daemon(args) as (proc, url):
        with non_reader(url, stream_request()) as s:
            in_flight(url, 1)
            closed_s = closed_by(s, 300)
        freed_s = freed_within(url, 30) if closed_s is not None else None
        yield CutStream(url, proc.log_path, closed_s, freed_s)


def test_a_stream_its_client_reads_none_of_is_closed_after_the_write_timeout(
    cut_stream: CutStream,
) -> None:
    assert cut_stream.closed_s is not None, "the stream was never closed"
    time.sleep(0.5)  # its log line
    log = log_text(cut_stream.log_path)
    # Its handler ended as a client's that left: 499, no error and no traceback.
    lines = [line for line in log.splitlines() if "/v1/chat/completions" in line]
    assert any(" 499 " in line for line in lines), log[-2000:]
    assert "Traceback" not in log and " 500 " not in log, log[-2000:]


def test_the_slot_a_non_reader_held_serves_the_next_client_once_it_is_closed(
    cut_stream: CutStream,
) -> None:
    # Its generation was cancelled: the slot was free long before 1,500 more tokens could end.
    assert cut_stream.freed_s is not None and cut_stream.freed_s < 10, cut_stream
    status, answer = chat(cut_stream.url)
    assert status == 200 and answer["choices"][0]["message"]["content"]


@pytest.fixture
def downloads(daemon_factory, tmp_path) -> Iterator[tuple[str, str]]:
    """A daemon with 4 connections and a file of 2 MB to download: its URL and the file's
    content request. Its answers may sit unread for a minute (`--write-timeout 60`)."""
    _, url = daemon_factory(
        [
            *("--no-default-model", "--max-connections", "4", "--operator-reserve", "1"),
            *("--write-timeout", "60"),
        ],
        env={"XDG_STATE_HOME": str(tmp_path)},
    )
    yield url, download_request(url, upload(url, 2 << 20))


def upload(url: str, size: int) -> str:
    """A batch input file of about `size` bytes stored by the daemon; its id."""
    ask = {"model": MODEL, "messages": [{"role": "user", "content": "a" * 1000}]}
    line = {"method": "POST", "url": "/v1/chat/completions", "body": ask}
    lines = b"".join(
        json.dumps({"custom_id": f"r{i}", **line}).encode() + b"\n" for i in range(size // 1100)
    )
    boundary = "b0undary"
    body = (
        (
            f'--{boundary}\r\nContent-Disposition: form-data; name="purpose"\r\n\r\nbatch\r\n'
            f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="in.jsonl"\r\n'
            "Content-Type: application/jsonl\r\n\r\n"
        ).encode()
        + lines
        + f"\r\n--{boundary}--\r\n".encode()
    )
    kind = f"multipart/form-data; boundary={boundary}"
    status, _, answer = raw_request(f"{url}/v1/files", "POST", body, kind, timeout=30)
    assert status == 200, answer
    return str(answer["id"])


def download_request(url: str, file_id: str) -> bytes:
    return f"GET /v1/files/{file_id}/content HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode()


def test_a_download_its_client_reads_none_of_is_closed_after_the_write_timeout(
    daemon_factory, tmp_path
) -> None:
    _, url = daemon_factory(
        ["--no-default-model", "--write-timeout", "1"], env={"XDG_STATE_HOME": str(tmp_path)}
    )
    with non_reader(url, download_request(url, upload(url, 2 << 20))) as s:
        waited = closed_by(s, 10)
    assert waited is not None and waited > 0.5


def test_under_pressure_a_download_its_client_does_not_read_gives_way_to_a_new_client(
    downloads,
) -> None:
    url, request = downloads
    held = [non_reader(url, request) for _ in range(4)]
    try:
        time.sleep(1.5)  # past UNREAD_GRACE_S: each answer has waited unread since it began
        assert raw_request(f"{url}/api/tags", timeout=10)[0] == 200
        assert sum(gone(s, 0.5) for s in held) == 1
    finally:
        release(held)


def test_under_pressure_the_answer_unread_longest_is_the_one_that_gives_way(downloads) -> None:
    url, request = downloads
    oldest = non_reader(url, request)
    time.sleep(1.0)
    others = [non_reader(url, request) for _ in range(3)]
    try:
        time.sleep(1.5)
        assert raw_request(f"{url}/api/tags", timeout=10)[0] == 200
        assert gone(oldest) and not any(gone(s, 0.2) for s in others)
    finally:
        release([oldest, *others])
