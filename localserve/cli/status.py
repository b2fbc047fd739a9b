"""The daemon itself: `status` and `shutdown`."""

from __future__ import annotations

import argparse
import time

import psutil

from localserve.cli import output
from localserve.cli.common import Failure, address_options, connect
from localserve.cli.output import FAILED, OK, UNREACHABLE
from localserve.client import DaemonUnreachable

SHUTDOWN_WAIT_S = 30.0


def add_parsers(sub: argparse._SubParsersAction) -> None:
    address = address_options()
    p = sub.add_parser(
        "status",
        parents=[address],
        help="is the daemon up: version, address, memory pools",
        description=f"Whether the daemon answers, and its memory pools. Exit code "
        f"{UNREACHABLE} when it does not.",
    )
    p.set_defaults(handler=status_command)
    p = sub.add_parser(
        "shutdown",
        parents=[address],
        help="stop the daemon",
        description="Stop the daemon: loaded models are freed, then it exits.",
    )
    p.set_defaults(handler=shutdown_command)


def status_command(args: argparse.Namespace) -> int:
    settings, client = connect(args)
    try:
        health = client.health()
    except DaemonUnreachable:
        print(f"localserve is not running at {settings.url}")
        return UNREACHABLE
    stats = client.stats()
    pid = f" (pid {stats['pid']})" if "pid" in stats else ""
    print(f"localserve {health.get('version', '?')} is running at {settings.url}{pid}")
    loaded = ", ".join(health.get("models") or []) or "none"
    print(f"models loaded: {loaded}")
    for device, engine in (health.get("devices") or {}).items():
        state = str(engine.get("state", "?"))
        if engine.get("reason"):
            state += f": {engine['reason']}"
        elif engine.get("pid"):
            state += f" (worker pid {engine['pid']}, {engine.get('restarts', 0)} restarts)"
        print(f"{device} engine: {state}")
    rows = []
    for pool in stats.get("pools", []):
        budget, used = int(pool.get("budget") or 0), int(pool.get("used") or 0)
        holders = pool.get("reserved") or {}
        models = ", ".join(f"{name} {output.size(n)}" for name, n in holders.items() if n)
        device = ": ".join(filter(None, (pool.get("backend_device"), pool.get("description"))))
        rows.append(
            (
                str(pool.get("device")),
                device or "-",
                output.size(budget),
                output.size(used),
                output.size(budget - used),
                models or "-",
            )
        )
    print()
    output.table(("POOL", "DEVICE", "BUDGET", "RESERVED", "FREE", "HELD BY"), rows)
    return OK


def shutdown_command(args: argparse.Namespace) -> int:
    settings, client = connect(args)
    try:
        answer = client.shutdown()
    except DaemonUnreachable:
        print(f"localserve is not running at {settings.url}")
        return OK
    # Return once it is gone (its port closed, and its process ended when it runs here), so
    # that a script may start another at once.
    pid = answer.get("pid")
    deadline = time.monotonic() + SHUTDOWN_WAIT_S
    while time.monotonic() < deadline:
        try:
            client.health(timeout=1.0)
        except DaemonUnreachable:
            if not (isinstance(pid, int) and _runs_here(pid)):
                print(f"localserve at {settings.url} stopped")
                return OK
        time.sleep(0.2)
    raise Failure(
        f"the daemon at {settings.url} has not stopped within {SHUTDOWN_WAIT_S:.0f} s", FAILED
    )


def _runs_here(pid: int) -> bool:
    """A local `localserve serve` still running as `pid` (a remote daemon's pid means nothing)."""
    try:
        process = psutil.Process(pid)
        return "serve" in process.cmdline() and process.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False
