"""Connections that hold nothing (idle, trickling their heads, or stalled in their bodies) give
way to new ones; only requests really in flight fill the daemon's slots, then a new one is a 503
with Retry-After, and the operator's reserve still serves the CLI and the tray."""

from __future__ import annotations

import http.client
import json
import socket
import time
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from localserve.client import Client
from tests.live.test_limits import chat
from tests.support.daemons import operator_headers, raw_request
from tests.support.helpers import MODEL

# -- connections ---------------------------------------------------------------------------------


@pytest.fixture
def crowded(daemon_factory) -> str:
    """A daemon with few connection slots, and the default timeouts (longer than these tests)."""
    _, url = daemon_factory(
        ["--no-default-model", "--max-connections", "8", "--max-connections-per-address", "4"]
    )
    return url


@pytest.fixture
def prompt(daemon_factory) -> str:
    """A daemon with short head and idle timeouts."""
    _, url = daemon_factory(["--no-default-model", "--header-timeout", "1", "--idle-timeout", "1"])
    return url


# A generation that runs to the end of the context: a request really in flight.
LONG = json.dumps(
    {"model": MODEL, "prompt": "Count from 1 to 100000.", "options": {"num_predict": 1 << 20}}
).encode()


@pytest.fixture
def busy(daemon_factory) -> Iterator[tuple[str, list[socket.socket]]]:
    """A daemon whose 4 connections each have a request in flight (long generations, one
    running and three queued), and those connections."""
    _, url = daemon_factory(
        [
            *("--model", MODEL, "--parallel", "1", "--ctx", "2048"),
            *("--max-connections", "4", "--operator-reserve", "1"),
        ]
    )
    held = hold(url, 4)
    for s in held:
        s.sendall(
            b"POST /api/generate HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: "
            b"application/json\r\nContent-Length: %d\r\n\r\n%s" % (len(LONG), LONG)
        )
    in_flight(url, 4)
    yield url, held
    release(held)


def in_flight(url: str, n: int, within_s: float = 60.0) -> None:
    """Wait until `n` sequences are running or queued, asking as the operator (its reserve
    serves it with every connection busy): on a loaded machine the heads may take a while."""
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        if sequences(url) >= n:
            return
        time.sleep(0.1)
    raise AssertionError(f"fewer than {n} sequences in flight after {within_s} s")


def sequences(url: str) -> float:
    """The sequences running or queued, as /metrics tells them."""
    _, _, text = raw_request(f"{url}/metrics", headers=operator_headers(url), timeout=10)
    lines = text.decode().splitlines() if isinstance(text, bytes) else []
    return sum(
        float(line.rsplit(" ", 1)[1])
        for line in lines
        if line.startswith(("localserve_sequences_running{", "localserve_sequences_waiting{"))
    )


@pytest.fixture
def stalling(daemon_factory) -> str:
    """A daemon with 4 connections, whose bodies may take a minute."""
    _, url = daemon_factory(
        [
            *("--no-default-model", "--max-connections", "4", "--operator-reserve", "1"),
            *("--max-connections-per-address", "2", "--body-timeout", "60"),
        ]
    )
    return url


def send_head_and(s: socket.socket, body: bytes) -> None:
    """A request's head promising 10,000 bytes of body, and `body`, the first of them."""
    s.sendall(
        b"POST /api/generate HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        b"Content-Type: application/json\r\nContent-Length: 10000\r\n\r\n" + body
    )


def hold(url: str, n: int, source: str = "127.0.0.1") -> list[socket.socket]:
    """`n` connections to the daemon from `source` (any of loopback's /8), sending nothing."""
    host, port = url.removeprefix("http://").split(":")
    return [
        socket.create_connection((host, int(port)), timeout=10, source_address=(source, 0))
        for _ in range(n)
    ]


def release(held: list[socket.socket]) -> None:
    for s in held:
        s.close()


@contextmanager
def connection(url: str) -> Iterator[socket.socket]:
    (s,) = hold(url, 1)
    with s:
        yield s


def closed_within(s: socket.socket, seconds: float) -> bytes | None:
    """What the daemon sent before it closed `s`, or None if it kept it open `seconds`."""
    s.settimeout(seconds)
    answer = b""
    try:
        while chunk := s.recv(4096):
            answer += chunk
    except TimeoutError:
        return None
    except ConnectionResetError:
        pass
    return answer


def test_idle_connections_beyond_max_connections_do_not_block_a_new_client(crowded) -> None:
    held = hold(crowded, 12)
    try:
        time.sleep(0.3)
        assert raw_request(f"{crowded}/health", timeout=10)[0] == 200
    finally:
        release(held)


def test_idle_connections_from_many_addresses_do_not_block_a_new_client(crowded) -> None:
    held = [s for i in range(2, 14) for s in hold(crowded, 1, f"127.0.0.{i}")]
    try:
        time.sleep(0.3)
        assert raw_request(f"{crowded}/health", timeout=10)[0] == 200
    finally:
        release(held)


def test_the_oldest_idle_connection_is_the_one_closed_to_make_room(crowded) -> None:
    oldest, *others = hold(crowded, 8)
    try:
        time.sleep(0.3)
        assert raw_request(f"{crowded}/health", timeout=10)[0] == 200
        assert closed_within(oldest, 2) == b""
        assert all(closed_within(s, 0.2) is None for s in others)
    finally:
        release([oldest, *others])


def test_a_head_that_trickles_in_is_cut_off_with_a_408_after_the_header_timeout(prompt) -> None:
    with connection(prompt) as s:
        s.sendall(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        started = time.monotonic()
        answer = None
        while answer is None and time.monotonic() - started < 8:
            s.sendall(b"X")  # a byte of a header now and then, never its end
            answer = closed_within(s, 0.2)
        waited = time.monotonic() - started
    assert answer is not None and answer.startswith(b"HTTP/1.1 408"), "never cut off"
    assert b"header_timeout" in answer and 0.8 < waited < 6


def test_a_connection_that_sends_nothing_is_closed_unanswered_after_the_header_timeout(
    prompt,
) -> None:
    with connection(prompt) as s:
        started = time.monotonic()
        assert closed_within(s, 8) == b""
        assert 0.8 < time.monotonic() - started < 6


def test_an_idle_keep_alive_connection_is_closed_after_the_idle_timeout(prompt) -> None:
    host, port = prompt.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=10)
    try:
        conn.request("GET", "/health")
        answer = conn.getresponse()
        assert answer.status == 200 and not answer.will_close
        answer.read()
        started = time.monotonic()
        assert conn.sock is not None and closed_within(conn.sock, 8) == b""
        assert 0.8 < time.monotonic() - started < 6
    finally:
        conn.close()


def test_a_blank_line_in_an_unread_body_does_not_hold_a_connection_open(prompt) -> None:
    with connection(prompt) as s:
        s.sendall(b"POST /nowhere HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 4\r\n\r\n")
        assert s.recv(4096).startswith(b"HTTP/1.1 404")
        s.sendall(b"\r\n\r\n")  # the body, after the answer: no head, yet it ends like one
        started = time.monotonic()
        assert closed_within(s, 8) == b""
        assert time.monotonic() - started < 6


def test_a_stalled_body_gives_way_to_a_new_client_with_a_408(stalling) -> None:
    held = hold(stalling, 4)
    try:
        for s in held:
            send_head_and(s, b"{")
        time.sleep(1.5)  # past STALL_GRACE_S: each body now arrives at under a byte a second
        assert raw_request(f"{stalling}/api/tags", timeout=10)[0] == 200
        answers = [closed_within(s, 2) for s in held]
        cut = [a for a in answers if a is not None]
        assert len(cut) == 1 and cut[0].startswith(b"HTTP/1.1 408"), answers
        assert b"too slowly" in cut[0]
    finally:
        release(held)


def test_the_stalled_body_with_the_least_progress_is_the_one_that_gives_way(stalling) -> None:
    slowest, *faster = hold(stalling, 4)
    try:
        send_head_and(slowest, b"{")
        for s in faster:
            send_head_and(s, b"{" + b" " * 600)  # below the minimum rate too, but ahead
        time.sleep(1.5)
        assert raw_request(f"{stalling}/api/tags", timeout=10)[0] == 200
        assert (closed_within(slowest, 2) or b"").startswith(b"HTTP/1.1 408")
        assert all(closed_within(s, 0.2) is None for s in faster)
    finally:
        release([slowest, *faster])


def test_a_loopback_client_is_not_held_to_the_per_address_cap(stalling) -> None:
    held = hold(stalling, 3)  # above the cap of 2, each with a body on its way
    try:
        for s in held:
            send_head_and(s, b"{")
        assert raw_request(f"{stalling}/api/tags", timeout=10)[0] == 200
    finally:
        release(held)


def test_with_every_connection_busy_a_request_is_a_503_with_retry_after_and_then_served(
    busy,
) -> None:
    url, held = busy
    status, headers, answer = raw_request(f"{url}/api/tags", timeout=10)
    assert status == 503 and "max_connections" in answer["error"]
    assert headers["Retry-After"] == "1"
    release(held)
    time.sleep(0.3)
    assert raw_request(f"{url}/api/tags", timeout=10)[0] == 200


def test_with_every_connection_busy_the_operator_is_still_served(busy) -> None:
    url, _ = busy
    status, _, answer = raw_request(f"{url}/api/tags", headers=operator_headers(url), timeout=10)
    assert status == 200 and "models" in answer


def test_with_many_idle_connections_held_status_and_a_chat_completion_are_served(
    daemon_factory,
) -> None:
    _, url = daemon_factory(
        [
            "--model",
            MODEL,
            "--parallel",
            "2",
            "--ctx",
            "1024",
            "--max-connections",
            "32",
            "--max-connections-per-address",
            "16",
        ]
    )
    held = hold(url, 100) + [s for i in range(2, 12) for s in hold(url, 10, f"127.0.0.{i}")]
    tricklers = hold(url, 20)
    try:
        for s in tricklers:
            s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nX-")
        time.sleep(0.3)
        client = Client(url, timeout=60)  # as `localserve status` asks
        assert client.health()["status"] == "ok" and client.stats()["pid"]
        status, answer = chat(url)
        assert status == 200 and answer["choices"][0]["message"]["content"]
    finally:
        release(held + tricklers)
