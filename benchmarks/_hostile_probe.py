"""The event-loop probe of bench_hostile.py, a process of its own so that neither the benchmark's
client loop nor its GIL delays a poll: `python -m benchmarks._hostile_probe PORT INTERVAL_S`.

It asks the daemon's /health every INTERVAL_S seconds down one keep-alive connection (a new one
when the daemon closes it, the connect counted in the poll's time) and prints one line per poll,
`START LATENCY`: when it was sent (time.monotonic, one clock for every process on the machine)
and how long the answer took. /health does no work of its own, so its latency is how long the
daemon's event loop kept it waiting. It prints `ready` after its first answer and stops on
SIGTERM.
"""

from __future__ import annotations

import http.client
import signal
import sys
import time

TIMEOUT_S = 300.0  # a stall longer than this is a hang; the poll then counts as this long


def poll(conn: http.client.HTTPConnection) -> None:
    conn.request("GET", "/health")
    with conn.getresponse() as r:
        r.read()


def main(argv: list[str]) -> int:
    port, interval = int(argv[0]), float(argv[1])
    stopping = False

    def stop(*_: object) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGTERM, stop)
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=TIMEOUT_S)
    first = True
    while not stopping:
        t0 = time.monotonic()
        try:
            poll(conn)
        except (OSError, http.client.HTTPException):
            # Closed under us (an idle or crowded connection): once more on a new one, the
            # reconnect inside the poll's time. A second failure is a poll as long as it took.
            conn.close()
            try:
                poll(conn)
            except (OSError, http.client.HTTPException):
                conn.close()
        latency = time.monotonic() - t0
        if first:
            print("ready", flush=True)
            first = False
        print(f"{t0:.6f} {latency:.6f}", flush=True)
        time.sleep(max(0.0, interval - latency))
    conn.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
