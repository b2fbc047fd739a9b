"""What the tray shows, read from the daemon's /health, /api/ps, /api/tags and /v1/batches: one
status, its line of text, the loaded models and the store's. Plain data, compared as a whole, so
that the menu is rebuilt only when something a user can see has changed."""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timezone

from localserve.client import JSON, bare_name
from localserve.ground.units import format_size, parse_time, time_span

# What a batch (/v1/batches) is once it has ended.
_ENDED = frozenset({"completed", "failed", "expired", "cancelled"})
# Ollama writes "kept for ever" as a time centuries away.
_FOREVER_S = 100 * 365 * 86400


class Status(enum.Enum):
    """The tray's states, in the order they win when several hold at once."""

    NOT_RUNNING = "not running"
    ERROR = "error"
    LOADING = "loading"  # starting the daemon, pulling a model, or loading one
    GENERATING = "generating"
    RUNNING = "running"  # models loaded, none answering
    IDLE = "idle"  # up, nothing loaded


@dataclass(frozen=True)
class LoadedModel:
    name: str
    size: str
    device: str
    stays: str  # keep-alive: "pinned", "busy", "unloads in 4 minutes", "kept loaded"
    pinned: bool
    in_flight: int

    @property
    def label(self) -> str:
        return f"{self.name}: {self.size}, {self.device}, {self.stays}"


@dataclass(frozen=True)
class TrayState:
    status: Status
    line: str
    loaded: tuple[LoadedModel, ...] = ()
    stored: tuple[str, ...] = ()
    # Upstream models (docs/upstreams.md): their name and the server that runs them.
    remote: tuple[tuple[str, str], ...] = ()

    @property
    def up(self) -> bool:
        return self.status not in (Status.NOT_RUNNING,)

    def is_loaded(self, name: str) -> bool:
        return any(m.name == name for m in self.loaded)


def not_running(why: str = "") -> TrayState:
    return TrayState(Status.NOT_RUNNING, "localserve is not running" + (f": {why}" if why else ""))


def starting() -> TrayState:
    return TrayState(Status.LOADING, "Starting localserve...")


def read_state(
    health: JSON,
    ps: list[JSON],
    tags: list[JSON],
    now: datetime | None = None,
    batches: Sequence[JSON] = (),
) -> TrayState:
    """The state of a daemon that answered, from its answers: the running batches' progress
    follows the line of a daemon not busy loading or failing."""
    now = now or datetime.now(timezone.utc)
    loaded = tuple(_loaded(m, now) for m in ps)
    local = [t for t in tags if not t.get("remote_host")]
    stored = tuple(sorted({bare_name(str(t.get("name", ""))) for t in local} - {""}))
    remote = tuple(
        sorted(
            (bare_name(str(t.get("name", ""))), str(t["remote_host"]))
            for t in tags
            if t.get("remote_host")
        )
    )
    status, line = _status(health, loaded)
    progress = _batches(batches)
    if progress and status in (Status.GENERATING, Status.RUNNING, Status.IDLE):
        line = f"{line}; {progress}"
    return TrayState(status, line, loaded, stored, remote)


def _batches(batches: Sequence[JSON]) -> str:
    """ "batch 12/40", "2 batches 30/80": the requests answered (or failed) of all, over the
    batches not ended yet."""
    running = [b for b in batches if b.get("status") not in _ENDED]
    if not running:
        return ""
    counts = [b.get("request_counts") or {} for b in running]
    total = sum(int(c.get("total") or 0) for c in counts)
    done = sum(int(c.get("completed") or 0) + int(c.get("failed") or 0) for c in counts)
    many = f"{len(running)} batches" if len(running) > 1 else "batch"
    return f"{many} {done}/{total}"


def _status(health: JSON, loaded: tuple[LoadedModel, ...]) -> tuple[Status, str]:
    failed = [
        f"{name} failed: {d.get('reason') or 'no reason given'}"
        for name, d in sorted((health.get("devices") or {}).items())
        if d.get("state") == "failed"
    ]
    if failed:
        return Status.ERROR, "Error: " + "; ".join(failed)
    pulls = health.get("pulling") or []
    if pulls:
        return Status.LOADING, "Pulling " + ", ".join(_pull(p) for p in pulls)
    if health.get("loading"):
        return Status.LOADING, "Loading " + ", ".join(map(bare_name, health["loading"])) + "..."
    busy = sum(m.in_flight for m in loaded)
    if busy:
        return Status.GENERATING, f"Generating ({busy} request{'s' if busy != 1 else ''})"
    if loaded:
        return Status.RUNNING, "Loaded: " + ", ".join(m.name for m in loaded)
    return Status.IDLE, "Idle: no models loaded"


def _pull(pull: JSON) -> str:
    done, total = pull.get("completed"), pull.get("total")
    share = f" {100 * done // total}%" if isinstance(done, int) and total else ""
    return f"{bare_name(str(pull.get('model', '')))}{share}"


def _loaded(model: JSON, now: datetime) -> LoadedModel:
    ours = model.get("localserve") or {}
    in_flight = int(ours.get("in_flight") or 0)
    pinned = bool(ours.get("pinned"))
    return LoadedModel(
        name=bare_name(str(model.get("name", ""))),
        size=format_size(int(model.get("size") or 0)),
        device=str(ours.get("device") or "cpu"),
        stays=_stays(model.get("expires_at"), pinned, in_flight, now),
        pinned=pinned,
        in_flight=in_flight,
    )


def _stays(expires_at: str | None, pinned: bool, in_flight: int, now: datetime) -> str:
    if pinned:
        return "pinned"
    if in_flight:
        return "busy"  # the keep-alive countdown starts when the last request ends
    moment = parse_time(expires_at)
    if moment is None:
        return "kept loaded"
    seconds = (moment - now).total_seconds()
    if seconds > _FOREVER_S:
        return "kept loaded"
    return "unloads now" if seconds < 1 else f"unloads in {time_span(seconds)}"
