"""The attack of bench_abuse.py, a process of its own so that its event loop never delays the
measured client: `python -m benchmarks._abuse_attack PORT IDLE TRICKLERS BODIES SOURCE...`.

It keeps IDLE sockets that send nothing, TRICKLERS that send a request's head a byte a second,
and BODIES that send a whole head and then trickle its body a byte a second, round-robin over
the SOURCE addresses (any of loopback's /8), each reopened a second
after the daemon cuts it (or after a connect that failed): an attacker who wants the sockets
back. It prints `ready` once every socket has tried to open once, and on SIGTERM one JSON line
of what it saw: sockets opened, sockets the daemon cut (answered 408, answered 503, or closed
unanswered) and connects that failed, by why.
"""

from __future__ import annotations

import asyncio
import json
import signal
import sys
from collections import Counter

from localserve.server.http.front import allow_descriptors

REOPEN_S = 1.0
TRICKLE_S = 1.0
CONNECT_S = 10.0
# A head that never ends: a header a byte a second outlasts any run.
HEAD = b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Padding: " + b"a" * 100_000
# A head whole at once, then a body that never ends: a byte a second of 100,000.
BODY_HEAD = (
    b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
    b"Content-Type: application/json\r\nContent-Length: 100000\r\n\r\n"
)
BODY = b'{"model": "smollm2", "messages": [], "x": "' + b"a" * 100_000


def kind(answer: bytes) -> str:
    if answer.startswith(b"HTTP/1.1 408"):
        return "cut_408"
    if answer.startswith(b"HTTP/1.1 503"):
        return "cut_503"
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


async def keep(
    port: int,
    source: str,
    mode: str,
    tally: Counter[str],
    ready: asyncio.Queue[None],
    stop: asyncio.Event,
) -> None:
    """One attack socket, reopened after each cut until `stop`."""
    first = True
    while not stop.is_set():
        try:
            reader, writer = await asyncio.wait_for(
                asyncio.open_connection("127.0.0.1", port, local_addr=(source, 0)), CONNECT_S
            )
        except (OSError, asyncio.TimeoutError) as exc:
            tally[f"connect_failed ({type(exc).__name__})"] += 1
            reader = writer = None
        else:
            tally["opened"] += 1
        if first:  # tried once: whether it opened is the daemon's affair
            first = False
            ready.put_nowait(None)
        if reader is None or writer is None:
            await asyncio.sleep(REOPEN_S)
            continue
        answer = await held(reader, writer, mode, stop)
        writer.close()
        if answer is None:
            return
        tally[kind(answer)] += 1
        await asyncio.sleep(REOPEN_S)


async def attack(port: int, counts: dict[str, int], sources: list[str]) -> Counter[str]:
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    tally: Counter[str] = Counter()
    ready: asyncio.Queue[None] = asyncio.Queue()
    modes = [mode for mode, n in counts.items() for _ in range(n)]
    total = len(modes)
    tasks = [
        asyncio.create_task(keep(port, sources[i % len(sources)], mode, tally, ready, stop))
        for i, mode in enumerate(modes)
    ]
    for _ in range(total):
        await ready.get()
    print("ready", flush=True)
    await stop.wait()
    for task in tasks:  # some may wait on a connect or a read: no need to let them finish
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    return tally


def main(argv: list[str]) -> int:
    port, idle, tricklers, bodies = (int(a) for a in argv[:4])
    allow_descriptors(idle + tricklers + bodies + 256)
    counts = {"idle": idle, "head": tricklers, "body": bodies}
    tally = asyncio.run(attack(port, counts, argv[4:]))
    print(json.dumps(dict(tally)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
