"""Rendering a pull's progress events: one bar per file (bytes, speed, ETA) on a terminal,
each new status once as a plain line otherwise."""

from __future__ import annotations

from collections.abc import Iterable

from rich.markup import escape
from rich.progress import (
    BarColumn,
    DownloadColumn,
    Progress,
    ProgressColumn,
    Task,
    TaskID,
    TextColumn,
    TimeRemainingColumn,
)
from rich.text import Text

from localserve.cli.output import size, stderr
from localserve.client import JSON


class SpeedColumn(ProgressColumn):
    """Speed in the binary units the sizes use (rich's own column is decimal: MB/s by MiB)."""

    def render(self, task: Task) -> Text:
        speed = task.finished_speed or task.speed
        return Text("-" if speed is None else f"{size(speed)}/s", style="progress.data.speed")


def show_pull(events: Iterable[JSON]) -> None:
    """Consume the events; an error event raises (from the client) before this returns."""
    if not stderr.is_terminal:
        _plain(events)
        return
    columns = (
        TextColumn("{task.description}"),
        BarColumn(),
        DownloadColumn(binary_units=True),
        SpeedColumn(),
        TimeRemainingColumn(),
    )
    bars: dict[str, TaskID] = {}
    with Progress(*columns, console=stderr, transient=False) as progress:
        last = None
        for event in events:
            status = str(event.get("status", ""))
            digest = event.get("digest")
            if digest and event.get("total"):
                key = str(digest)
                if key not in bars:
                    bars[key] = progress.add_task(escape(_short(status, key)), total=event["total"])
                progress.update(bars[key], completed=event.get("completed", 0) or 0)
            elif status and status != last:
                progress.console.print(escape(status))
            last = status


def _plain(events: Iterable[JSON]) -> None:
    seen: set[str] = set()
    for event in events:
        status = str(event.get("status", ""))
        if status and status not in seen:
            seen.add(status)
            stderr.print(escape(status))


def _short(status: str, digest: str) -> str:
    """`downloading sha256:0123456789ab…` reads better than a 71-character digest."""
    short = digest.split(":")[-1][:12]
    verb = status.split(" ")[0] if status else "downloading"
    return f"{verb} {short}"
