"""The attack of bench_abuse.py, a process of its own so that its event loop never delays the
measured client: `python -m benchmarks._abuse_attack PORT MODE=N[,MODE=N...] FILE_ID SOURCE...`.

The modes: `idle` sockets send nothing, `head` ones send a request's head a byte a second,
`body` ones send a whole head and then trickle its body a byte a second; `stream` and
`download` ones are readers that never read: each asks for a streamed chat completion (as long
as the model's context) or for the file FILE_ID (`GET /v1/files/ID/content`) and reads none
of the answer. Their receive window and segments are small (as an attacker sets them), so the
daemon's output is held back after some 80 KB, not after the megabytes loopback's buffers
take otherwise. The sockets go round-robin over the SOURCE addresses (any of loopback's /8),
each reopened a second after the daemon cuts it (or after a connect that failed): an
attacker who wants the sockets back. A reader learns of its cut by sending a blank line each
second (a reset answers it once the daemon has closed the socket); what the daemon sent it is
peeked at, not read. It prints `ready` once every socket has tried to open once, and on
SIGTERM one JSON line of what it saw: sockets opened, sockets the daemon cut (answered 408,
answered 503, cut mid-answer, or closed unanswered) and connects that failed, by why.
"""

from __future__ import annotations

import asyncio
import json
import select
import signal
import socket
import sys
from collections import Counter

from localserve.server.http.front import allow_descriptors

REOPEN_S = 1.0
TRICKLE_S = 1.0
CONNECT_S = 10.0
MODES = ("idle", "head", "body", "stream", "download")
# A head that never ends: a header a byte a second outlasts any run.
HEAD = b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Padding: " + b"a" * 100_000
# A head whole at once, then a body that never ends: a byte a second of 100,000.
BODY_HEAD = (
    b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
    b"Content-Type: application/json\r\nContent-Length: 100000\r\n\r\n"
)
BODY = b'{"model": "smollm2", "messages": [], "x": "' + b"a" * 100_000
# A streamed answer that runs to the context's end: SmolLM2's end tokens banned.
STREAM = json.dumps(
    {
        "model": "smollm2",
        "messages": [{"role": "user", "content": "Count from 1 to 100000."}],
        "stream": True,
        "logit_bias": {"0": -100, "2": -100},
    }
).encode()
STREAM_REQUEST = (
    b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json"
    b"\r\nContent-Length: %d\r\n\r\n%s" % (len(STREAM), STREAM)
)
# The window a non-reader offers: the smallest the kernel allows, in small segments.
READER_RCVBUF = 1024
READER_MSS = 88
_CUT = select.POLLERR | select.POLLHUP | getattr(select, "POLLRDHUP", 0)


def kind(answer: bytes) -> str:
    if answer.startswith(b"HTTP/1.1 408"):
        return "cut_408"
    if answer.startswith(b"HTTP/1.1 503"):
        return "cut_503"
    if answer.startswith(b"HTTP/1.1 200"):
        return "cut_unread"  # a reader's, its answer begun
    return "cut_unanswered"


async def held(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, mode: str, stop: asyncio.Event
) -> bytes | None:
    """What the daemon sent before it cut the socket, or None if we stopped first. `mode`:
    idle, head (trickles a head) or body (sends a head, trickles a body)."""
    sent = 0
    answer = b""
    trickle = {"idle": b"", "head": HEAD, "body": BODY}[mode]
    if mode == "body":
        writer.write(BODY_HEAD)
    while not stop.is_set():
        try:
            chunk = await asyncio.wait_for(reader.read(4096), TRICKLE_S)
        except asyncio.TimeoutError:
            if trickle and not answer:
                try:
                    writer.write(trickle[sent : sent + 1])
                except (ConnectionError, RuntimeError):
                    return answer
                sent += 1
            continue
        except ConnectionError:
            return answer
        if not chunk:
            return answer
        answer += chunk
    return None


async def unread(sock: socket.socket, request: bytes, stop: asyncio.Event) -> bytes | None:
    """Send `request` on the connected `sock` and read none of the answer: what the daemon
    had sent when it cut the socket (peeked at), or None if we stopped first."""
    loop = asyncio.get_running_loop()
    await loop.sock_sendall(sock, request)
    poller = select.poll()
    poller.register(sock, _CUT)
    while not stop.is_set():
        try:
            await asyncio.wait_for(stop.wait(), REOPEN_S)
        except asyncio.TimeoutError:
            pass
        try:
            sock.send(b"\r\n")  # before a request's head a blank line is skipped (RFC 9112)
        except BlockingIOError:
            continue
        except OSError:
            return _peek(sock)
        await asyncio.sleep(0.05)  # for the reset
        if poller.poll(0):
            return _peek(sock)
    return None


def _peek(sock: socket.socket) -> bytes:
    try:
        return sock.recv(16, socket.MSG_PEEK | socket.MSG_DONTWAIT)
    except OSError:
        return b""


def request_of(mode: str, file_id: str) -> bytes | None:
    """What a reader asks for; None for the other modes."""
    if mode == "stream":
        return STREAM_REQUEST
    if mode == "download":
        return f"GET /v1/files/{file_id}/content HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode()
    return None


async def open_reader(port: int, source: str) -> socket.socket:
    """A reader's socket, connected: a small window, small segments."""
    sock = socket.socket()
    try:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_MAXSEG, READER_MSS)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, READER_RCVBUF)
        sock.setblocking(False)
        sock.bind((source, 0))
        loop = asyncio.get_running_loop()
        await asyncio.wait_for(loop.sock_connect(sock, ("127.0.0.1", port)), CONNECT_S)
    except BaseException:
        sock.close()
        raise
    return sock


async def keep(
    port: int,
    source: str,
    mode: str,
    file_id: str,
    tally: Counter[str],
    ready: asyncio.Queue[None],
    stop: asyncio.Event,
) -> None:
    """One attack socket, reopened after each cut until `stop`."""
    first = True
    request = request_of(mode, file_id)
    while not stop.is_set():
        sock = reader = writer = None
        try:
            if request is not None:
                sock = await open_reader(port, source)
            else:
                reader, writer = await asyncio.wait_for(
                    asyncio.open_connection("127.0.0.1", port, local_addr=(source, 0)), CONNECT_S
                )
        except (OSError, asyncio.TimeoutError) as exc:
            tally[f"connect_failed ({type(exc).__name__})"] += 1
        else:
            tally["opened"] += 1
        if first:  # tried once: whether it opened is the daemon's affair
            first = False
            ready.put_nowait(None)
        if sock is not None and request is not None:
            try:
                answer = await unread(sock, request, stop)
            except OSError:
                answer = b""
            sock.close()
            if answer == b"":  # a reset discards what it had been sent: the peek saw none
                answer = b"HTTP/1.1 200"
        elif reader is not None and writer is not None:
            answer = await held(reader, writer, mode, stop)
            writer.close()
        else:
            await asyncio.sleep(REOPEN_S)
            continue
        if answer is None:
            return
        tally[kind(answer)] += 1
        await asyncio.sleep(REOPEN_S)


async def attack(
    port: int, counts: dict[str, int], file_id: str, sources: list[str]
) -> Counter[str]:
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    tally: Counter[str] = Counter()
    ready: asyncio.Queue[None] = asyncio.Queue()
    modes = [mode for mode, n in counts.items() for _ in range(n)]
    tasks = [
        asyncio.create_task(
            keep(port, sources[i % len(sources)], mode, file_id, tally, ready, stop)
        )
        for i, mode in enumerate(modes)
    ]
    for _ in range(len(modes)):
        await ready.get()
    print("ready", flush=True)
    await stop.wait()
    for task in tasks:  # some may wait on a connect or a read: no need to let them finish
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    return tally


def parse_counts(text: str) -> dict[str, int]:
    counts = {mode: 0 for mode in MODES}
    for part in filter(None, text.split(",")):
        mode, n = part.split("=")
        if mode not in counts:
            raise SystemExit(f"unknown mode {mode!r}: one of {', '.join(MODES)}")
        counts[mode] = int(n)
    return counts


def main(argv: list[str]) -> int:
    port, counts, file_id = int(argv[0]), parse_counts(argv[1]), argv[2]
    allow_descriptors(sum(counts.values()) + 256)
    tally = asyncio.run(attack(port, counts, file_id, argv[3:]))
    print(json.dumps(dict(tally)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
