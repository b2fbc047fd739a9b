"""`batches`: OpenAI's Batch API jobs on the daemon, with their status and progress."""

from __future__ import annotations

import argparse
import time

from localserve.cli import output
from localserve.cli.common import address_options, connect
from localserve.cli.output import OK
from localserve.client import JSON
from localserve.ground.units import time_span


def add_parsers(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "batches",
        parents=[address_options()],
        help="list the batch jobs (/v1/batches) and their progress",
        description="The batch jobs of OpenAI's Batch API, newest first: status, requests "
        "answered and failed of all, and when each was created.",
    )
    p.add_argument("--limit", type=int, default=20, help="how many to list (1 to 100; 20)")
    p.set_defaults(handler=batches_command)


def batches_command(args: argparse.Namespace) -> int:
    _, client = connect(args)
    rows = [row(b, time.time()) for b in client.batches(max(1, min(args.limit, 100)))]
    output.table(("ID", "STATUS", "ENDPOINT", "PROGRESS", "FAILED", "CREATED"), rows)
    return OK


def row(batch: JSON, now: float) -> tuple[str, str, str, str, str, str]:
    counts = batch.get("request_counts") or {}
    total = int(counts.get("total") or 0)
    done = int(counts.get("completed") or 0) + int(counts.get("failed") or 0)
    progress = f"{done}/{total}" + (f" ({100 * done // total}%)" if total else "")
    created = batch.get("created_at")
    ago = f"{time_span(max(0.0, now - created))} ago" if isinstance(created, int) else "-"
    return (
        str(batch.get("id", "")),
        str(batch.get("status", "")),
        str(batch.get("endpoint", "")),
        progress,
        str(counts.get("failed", 0)),
        ago,
    )
