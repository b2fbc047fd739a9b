"""What the CLI prints: exit codes, errors, sizes, times and tables.

Tables and messages go through rich on a terminal; piped, they are plain text a script can cut.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from datetime import datetime, timezone

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from localserve.ground.units import format_size, parse_time, time_span

# Exit codes scripts can rely on (documented in `localserve --help`).
OK = 0
FAILED = 1  # the daemon refused or failed: does not fit, download failed, bad request
USAGE = 2  # a bad command line or configuration
UNREACHABLE = 3  # no daemon answers at the address
NOT_FOUND = 4  # no such model
INTERRUPTED = 130  # Ctrl-C, as shells report SIGINT

EXIT_CODES_HELP = (
    "exit codes: 0 success, 1 the daemon refused or failed, 2 bad usage or configuration, "
    "3 daemon unreachable, 4 unknown model, 130 interrupted"
)

stdout = Console(highlight=False, soft_wrap=True)
stderr = Console(stderr=True, highlight=False, soft_wrap=True)


def error(message: str) -> None:
    stderr.print(f"[bold red]Error:[/] {escape(message)}")


def note(message: str) -> None:
    """A side remark for a person (on stderr, so it never mixes with an answer in a pipe)."""
    stderr.print(escape(message), style="dim")


def size(n: int | float | None) -> str:
    return "-" if n is None else format_size(int(n))


def ago(text: str | None) -> str:
    moment = parse_time(text)
    if moment is None:
        return "-"
    seconds = (datetime.now(timezone.utc) - moment).total_seconds()
    return "just now" if seconds < 1 else f"{time_span(seconds)} ago"


def until(text: str | None) -> str:
    moment = parse_time(text)
    if moment is None:
        return "-"
    seconds = (moment - datetime.now(timezone.utc)).total_seconds()
    if seconds > 100 * 365 * 86400:
        return "forever"
    return "now" if seconds < 1 else f"{time_span(seconds)} from now"


def table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> None:
    if stdout.is_terminal:
        grid = Table(box=None, pad_edge=False, header_style="bold")
        for header in headers:
            grid.add_column(header, no_wrap=True)
        for row in rows:
            grid.add_row(*(escape(cell) for cell in row))
        stdout.print(grid)
        return
    widths = [max(len(str(r[i])) for r in [headers, *rows]) for i in range(len(headers))]
    for row in [headers, *rows]:
        cells = [str(cell).ljust(width) for cell, width in zip(row, widths)]
        sys.stdout.write("  ".join(cells).rstrip() + "\n")
    sys.stdout.flush()


class spinner:
    """A spinner on stderr while something slow happens; piped, one plain line instead."""

    def __init__(self, message: str) -> None:
        self.message = message
        self._status = stderr.status(escape(message)) if stderr.is_terminal else None

    def __enter__(self) -> spinner:
        if self._status is not None:
            self._status.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._status is not None:
            self._status.__exit__(None, None, None)
