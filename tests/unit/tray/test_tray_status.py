"""What the tray says, read from the daemon's answers (pure: tray/status.py)."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from localserve_tray.status import Status, read_state

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=timezone.utc)
UP = {
    "status": "ok",
    "models": [],
    "loading": [],
    "pulling": [],
    "devices": {"cpu": {"state": "running", "reason": None}},
}


def loaded(name: str, in_flight: int = 0, pinned: bool = False, expires_in: float = 240) -> dict:
    return {
        "name": f"{name}:latest",
        "size": 270 << 20,
        "expires_at": (NOW + timedelta(seconds=expires_in)).isoformat(),
        "localserve": {"device": "cpu", "in_flight": in_flight, "pinned": pinned},
    }


def test_a_daemon_with_nothing_loaded_is_idle() -> None:
    state = read_state(UP, [], [{"name": "smollm2:latest"}], NOW)
    assert (state.status, state.line) == (Status.IDLE, "Idle: no models loaded")
    assert state.stored == ("smollm2",)


def test_loaded_models_show_memory_device_and_keep_alive() -> None:
    state = read_state(UP, [loaded("smollm2")], [], NOW)
    assert state.status is Status.RUNNING
    assert state.line == "Loaded: smollm2"
    assert state.loaded[0].label == "smollm2: 270.0 MiB, cpu, unloads in 4 minutes"


def test_a_pinned_or_busy_model_says_so_instead_of_its_countdown() -> None:
    state = read_state(UP, [loaded("a", pinned=True), loaded("b", in_flight=2)], [], NOW)
    assert [m.stays for m in state.loaded] == ["pinned", "busy"]


def test_a_model_kept_for_ever_says_kept_loaded() -> None:
    state = read_state(UP, [loaded("a", expires_in=300 * 365 * 86400)], [], NOW)
    assert state.loaded[0].stays == "kept loaded"


def test_requests_in_flight_make_it_generating_with_their_count() -> None:
    state = read_state(UP, [loaded("a", in_flight=2), loaded("b", in_flight=1)], [], NOW)
    assert (state.status, state.line) == (Status.GENERATING, "Generating (3 requests)")


def test_a_load_in_progress_shows_as_loading() -> None:
    state = read_state({**UP, "loading": ["gemma3"]}, [loaded("a", in_flight=1)], [], NOW)
    assert (state.status, state.line) == (Status.LOADING, "Loading gemma3...")


def test_a_pull_shows_its_progress() -> None:
    pull = {"model": "gemma3", "status": "pulling sha256:ab", "completed": 45, "total": 100}
    state = read_state({**UP, "pulling": [pull]}, [], [], NOW)
    assert (state.status, state.line) == (Status.LOADING, "Pulling gemma3 45%")


def test_a_failed_device_is_an_error_with_its_reason() -> None:
    devices = {"cpu": {"state": "running"}, "gpu0": {"state": "failed", "reason": "SIGILL"}}
    state = read_state({**UP, "devices": devices, "loading": ["x"]}, [], [], NOW)
    assert (state.status, state.line) == (Status.ERROR, "Error: gpu0 failed: SIGILL")


def test_the_same_answers_give_equal_states_so_the_menu_is_not_rebuilt() -> None:
    assert read_state(UP, [loaded("a")], [], NOW) == read_state(UP, [loaded("a")], [], NOW)
    assert read_state(UP, [loaded("a")], [], NOW) != read_state(UP, [loaded("a", 1)], [], NOW)


def test_a_loaded_model_is_ticked_in_the_store_list() -> None:
    state = read_state(UP, [loaded("a")], [{"name": "a:latest"}, {"name": "b:latest"}], NOW)
    assert [(n, state.is_loaded(n)) for n in state.stored] == [("a", True), ("b", False)]


def batch(status: str, total: int, completed: int, failed: int = 0) -> dict:
    counts = {"total": total, "completed": completed, "failed": failed}
    return {"id": "batch_x", "status": status, "request_counts": counts}


def test_running_batches_show_their_progress_after_the_line() -> None:
    one = [batch("in_progress", 40, 10, 2), batch("completed", 5, 5)]
    state = read_state(UP, [loaded("a", in_flight=4)], [], NOW, batches=one)
    assert state.line == "Generating (4 requests); batch 12/40"
    two = [batch("in_progress", 40, 10), batch("validating", 40, 0)]
    assert (
        read_state(UP, [], [], NOW, batches=two).line == "Idle: no models loaded; 2 batches 10/80"
    )
    ended = [batch("completed", 40, 40), batch("cancelled", 9, 3)]
    assert read_state(UP, [], [], NOW, batches=ended).line == "Idle: no models loaded"
    loading = read_state({**UP, "loading": ["gemma3"]}, [], [], NOW, batches=one)
    assert loading.line == "Loading gemma3..."


def test_an_upstreams_models_are_listed_as_remote_and_not_offered_to_load() -> None:
    tags = [{"name": "a:latest"}, {"name": "big:latest", "remote_host": "http://gpu-box:8000/v1"}]
    state = read_state(UP, [], tags, NOW)
    assert state.stored == ("a",)
    assert state.remote == (("big", "http://gpu-box:8000/v1"),)
