"""Sending fuzz cases (fuzz_cases.py) to the live daemon, each on its own: what a case needs is
made before it and what it made is undone after it, so that no case answers differently for
the cases that ran before it.

- A case whose route names a file, a batch or a stored response gets a fresh one (its id in
  place of SETUP_ID), removed after the case: a batch is cancelled and waited for, then its
  file deleted.
- What a case makes itself is undone: an uploaded file deleted, a created batch cancelled, an
  imported model deleted, the served model unpinned.

Each case is sent with a real client timeout (CASE_BOUND_S), on a connection of its own, and
timed; meanwhile a thread asks /health every POLL_S and notes each answer that is not a 200
within HEALTH_BOUND_S.
"""

from __future__ import annotations

import http.client
import json
import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from tests.support.fuzz_cases import KEY, Case, batch_file, form, headers_for
from tests.support.fuzz_routes import SETUP_ID, Route
from tests.support.helpers import MODEL

# Each case answered within this, or it fails (wider on a machine busy with other work).
CASE_BOUND_S = float(os.environ.get("LOCALSERVE_TEST_FUZZ_BOUND_S") or 10)
HEALTH_BOUND_S = 5.0
POLL_S = 0.1
SETUP_TIMEOUT_S = 60.0
DONE = {"completed", "failed", "cancelled", "expired"}


@dataclass
class Answer:
    status: int
    body: bytes
    seconds: float

    def json(self) -> Any:
        try:
            return json.loads(self.body)
        except ValueError:
            return None


def exchange(
    url: str, method: str, target: str, body: bytes, headers: dict[str, bytes], timeout: float
) -> Answer:
    """One request on a connection of its own. A daemon that answers before it has read the
    whole body (a 413, a 401) may close the connection while we still send: its answer is
    read all the same."""
    parts = urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=timeout)
    start = time.monotonic()
    try:
        conn.putrequest(method, target, skip_accept_encoding=True)
        for name, value in headers.items():
            conn.putheader(name, value)
        conn.putheader("Content-Length", str(len(body)))
        try:
            conn.endheaders(body)
        except (BrokenPipeError, ConnectionResetError):
            pass
        response = conn.getresponse()
        data = response.read()
        return Answer(response.status, data, time.monotonic() - start)
    finally:
        conn.close()


def call(url: str, method: str, path: str, body: Any = None, form_body: bytes = b"") -> Answer:
    """A well-formed request of the setup or the undoing, with the right key."""
    headers = {"Authorization": f"Bearer {KEY}".encode()}
    if form_body:
        headers.update(headers_for(Route("POST", "/v1/files")))
    data = form_body or (b"" if body is None else json.dumps(body).encode())
    if body is not None:
        headers["Content-Type"] = b"application/json"
    return exchange(url, method, path, data, headers, SETUP_TIMEOUT_S)


def send(url: str, case: Case) -> Answer:
    """The case's answer, within CASE_BOUND_S (socket.timeout past it), with what it needs
    made before it and what it made undone after it."""
    with _made(url, case.setup) as made:
        target = case.target.replace(SETUP_ID, made)
        body = case.body.replace(SETUP_ID.encode(), made.encode())
        answer = exchange(url, case.route.method, target, body, case.headers, CASE_BOUND_S)
        _undo(url, case.route, answer)
    return answer


# -- making and undoing --------------------------------------------------------------------------


def _id(answer: Answer, what: str) -> str:
    got = answer.json()
    if answer.status != 200 or not isinstance(got, dict) or not isinstance(got.get("id"), str):
        raise AssertionError(f"the setup could not make {what}: {answer}")
    return str(got["id"])


@contextmanager
def _made(url: str, setup: str | None) -> Iterator[str]:
    if setup is None:
        yield SETUP_ID
    elif setup == "response":
        asked = {"model": MODEL, "input": "Hi", "max_output_tokens": 1, "store": True}
        made = _id(call(url, "POST", "/v1/responses", asked), "a response")
        try:
            yield made
        finally:
            call(url, "DELETE", f"/v1/responses/{made}")
    else:
        file = _id(
            call(url, "POST", "/v1/files", form_body=form({"purpose": "batch"}, batch_file())),
            "a file",
        )
        try:
            if setup == "file":
                yield file
            else:
                asked = {
                    "input_file_id": file,
                    "endpoint": "/v1/chat/completions",
                    "completion_window": "24h",
                }
                batch = _id(call(url, "POST", "/v1/batches", asked), "a batch")
                try:
                    yield batch
                finally:
                    _cancel(url, batch)
        finally:
            call(url, "DELETE", f"/v1/files/{file}")


def _cancel(url: str, batch: str) -> None:
    """Cancel a batch and wait until it has stopped, so that its file can go."""
    call(url, "POST", f"/v1/batches/{batch}/cancel")
    deadline = time.monotonic() + SETUP_TIMEOUT_S
    while time.monotonic() < deadline:
        got = call(url, "GET", f"/v1/batches/{batch}").json()
        if not isinstance(got, dict) or got.get("status") in DONE:
            return
        time.sleep(0.1)


def _undo(url: str, route: Route, answer: Answer) -> None:
    got = answer.json()
    if answer.status != 200 or not isinstance(got, dict):
        return
    if route == Route("POST", "/v1/files") and isinstance(got.get("id"), str):
        call(url, "DELETE", f"/v1/files/{got['id']}")
    elif route == Route("POST", "/v1/batches") and isinstance(got.get("id"), str):
        _cancel(url, got["id"])
    elif route == Route("POST", "/api/admin/import") and isinstance(got.get("model"), str):
        call(url, "DELETE", "/api/delete", {"model": got["model"]})
    elif route in (Route("POST", "/api/admin/pin"), Route("POST", "/api/admin/load")):
        call(url, "POST", "/api/admin/pin", {"model": MODEL, "pinned": False})


# -- /health, watched ----------------------------------------------------------------------------


@dataclass
class HealthWatch:
    """Asks /health every POLL_S, from a thread of its own, while it is entered."""

    url: str
    worst_s: float = 0.0
    asked: int = 0
    failures: list[tuple[float, str]] = field(default_factory=list)  # (when, what)
    _stop: threading.Event = field(default_factory=threading.Event)

    def __enter__(self) -> HealthWatch:
        self._thread = threading.Thread(target=self._run, name="health-watch", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def failures_since(self, start: float) -> list[str]:
        return [what for when, what in self.failures if when >= start]

    def _run(self) -> None:
        while not self._stop.wait(POLL_S):
            start = time.monotonic()
            try:
                answer = exchange(self.url, "GET", "/health", b"", {}, HEALTH_BOUND_S)
                failure = None if answer.status == 200 else f"/health answered {answer.status}"
            except OSError as exc:
                failure = f"/health had no answer within {HEALTH_BOUND_S:g} s: {exc!r}"
            seconds = time.monotonic() - start
            self.asked += 1
            self.worst_s = max(self.worst_s, seconds)
            if failure is not None:
                self.failures.append((start, f"{failure} (asked {seconds:.1f} s)"))
