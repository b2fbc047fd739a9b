"""No request is a 5xx, none goes unanswered, and none keeps /health from answering (issues
#45 and #57): every route the app's router serves is fuzzed against a live daemon that wants
an API key, with hypothesis' cases (fuzz_cases.py) and with requests at and past the sizes the
route takes (fuzz_large.py). Each is answered within CASE_BOUND_S, while a thread asks /health
throughout (fuzz_client.py).

The routes come from the router (fuzz_routes.py), so a new route is fuzzed at once, and a test
names it until it has a base request. Each case stands alone: what it needs is made for it and
what it made is undone after it, and each route's cases are drawn apart from the others', so
that no case's answer depends on the order the cases ran in. The daemon pulls from a hub on
127.0.0.1 that answers 404 to everything: no pull reaches the network or writes a file.

The seed is fixed, so CI fails only for a change; LOCALSERVE_TEST_FUZZ_SEED and
LOCALSERVE_TEST_FUZZ_CASES (cases of each generating route; a third as many for the others)
hunt further, and LOCALSERVE_TEST_FUZZ_BOUND_S widens the bound on a machine busy with other
work. The seed, the count of cases and what they were answered are written to the terminal
when the module ends, whatever pytest captures. About two minutes on 2 cores: every
generation is capped at CAP tokens (short_generations.py), and the daemon's body limits are
lowered (fuzz_routes.LIMIT_ARGS).
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections import Counter
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, given, seed, settings

from tests.support import daemons
from tests.support.fuzz_cases import KEY, Case, cases
from tests.support.fuzz_client import CASE_BOUND_S, Answer, HealthWatch, exchange, send
from tests.support.fuzz_large import grid, large_case
from tests.support.fuzz_routes import (
    BASES,
    GENERATING,
    LIMIT_ARGS,
    Route,
    served_routes,
)
from tests.support.helpers import MODEL
from tests.support.hub_server import Hub
from tests.support.live import running_daemon

SEED = int(os.environ.get("LOCALSERVE_TEST_FUZZ_SEED") or 45)
CASES = int(os.environ.get("LOCALSERVE_TEST_FUZZ_CASES") or 40)
# A window of 256 tokens: a prompt cut to fit it (Ollama) or embedded whole is a case too.
ARGS = ["--model", MODEL, "--parallel", "2", "--ctx", "256", "--api-key", KEY, *LIMIT_ARGS]
ROUTES = served_routes()
SHORT_BOUND_S = 5.0  # a short completion, while another request is in the worker
# SmolLM2 has no fill-in-the-middle tokens: /infill answers it a 400, however it is asked.
NO_FIM = {Route("POST", "/infill")}


def cases_of(route: Route) -> int:
    return CASES if route in GENERATING else max(1, CASES // 3)


class Fuzzed:
    """What the fuzzing saw: answers by route and status, the slowest answer, /health."""

    def __init__(self, watch: HealthWatch) -> None:
        self.watch = watch
        self.seen: Counter[tuple[Route, int]] = Counter()
        self.large = 0  # of the cases seen, those at or past a size limit
        self.slowest = (0.0, "")

    def check(self, url: str, case: Case, shape: str | None = None) -> None:
        """The case is answered, within the bound, not with a 5xx, and /health answered
        meanwhile."""
        start = time.monotonic()
        try:
            answer = send(url, case)
        except OSError as exc:
            pytest.fail(f"no answer within {CASE_BOUND_S:g} s ({exc!r}) to {case!r}")
        self.seen[(case.route, answer.status)] += 1
        self.large += shape is not None
        if answer.seconds > self.slowest[0]:
            self.slowest = (answer.seconds, f"{case.route} {shape or ''}".strip())
        assert answer.status < 500, (case, answer.body[:500])
        assert answer.seconds <= CASE_BOUND_S, (f"answered in {answer.seconds:.1f} s", case)
        assert not self.watch.failures_since(start), (self.watch.failures_since(start), case)

    def line(self) -> str:
        statuses = Counter(status for (_, status), n in self.seen.items() for _ in range(n))
        return (
            f"fuzz seed={SEED} cases={sum(self.seen.values())} (large: {self.large})"
            f" routes={len({route for route, _ in self.seen})}/{len(ROUTES)} answers: "
            + ", ".join(f"{status}: {n}" for status, n in sorted(statuses.items()))
            + f"; slowest {self.slowest[0]:.1f} s ({self.slowest[1]}); /health asked "
            f"{self.watch.asked} times, worst {self.watch.worst_s:.2f} s"
        )


@pytest.fixture(scope="module")
def hub() -> Iterator[Hub]:
    served = Hub().start()  # no files: every listing and download is a 404
    try:
        yield served
    finally:
        served.stop()


@pytest.fixture(scope="module")
def live(hub: Hub) -> Iterator[str]:
    with running_daemon(ARGS, env={"HF_ENDPOINT": hub.url}) as (proc, url):
        yield url
        assert proc.poll() is None, daemons.log_text(proc.log_path)


@pytest.fixture(scope="module")
def fuzzed(live: str, pytestconfig: pytest.Config) -> Iterator[Fuzzed]:
    """Written to the terminal when the module ends, passed or failed, under -q too."""
    with HealthWatch(live) as watch:
        tally = Fuzzed(watch)
        yield tally
    reporter = pytestconfig.pluginmanager.get_plugin("terminalreporter")
    capture = pytestconfig.pluginmanager.get_plugin("capturemanager")
    if reporter is not None and capture is not None:
        with capture.global_and_fixture_disabled():
            reporter.write_line(f"\n{tally.line()}")


@pytest.mark.parametrize("route", ROUTES, ids=str)
def test_no_fuzzed_request_is_a_5xx(route: Route, live: str, fuzzed: Fuzzed) -> None:
    @seed(SEED)
    @settings(
        max_examples=cases_of(route),
        deadline=None,
        database=None,
        print_blob=True,
        suppress_health_check=list(HealthCheck),
    )
    @given(case=cases(route))
    def fuzz(case: Case) -> None:
        fuzzed.check(live, case)

    fuzz()


@pytest.mark.parametrize(("route", "shape"), list(grid(ROUTES)), ids=lambda p: str(p))
def test_no_request_at_or_past_a_size_limit_is_a_5xx(
    route: Route, shape: str, live: str, fuzzed: Fuzzed
) -> None:
    fuzzed.check(live, large_case(route, shape, SEED), shape)


def test_every_served_route_has_a_base_request() -> None:
    """A new route is fuzzed from an empty request until it gets a base in fuzz_routes.py."""
    assert [str(r) for r in ROUTES if r not in BASES] == []
    assert [str(r) for r in BASES if r not in ROUTES] == []


def test_the_fuzzing_reached_every_route_and_the_daemon_survived(live: str, fuzzed: Fuzzed) -> None:
    """What the fuzzing above saw (so this runs after it, in the same module): every route
    answered, a 200 from every generating one the model can answer (the fuzzing got past the
    checks to the model), /health never failed, and the daemon still answers."""
    line = fuzzed.line()
    assert {route for route, _ in fuzzed.seen} == set(ROUTES), line
    assert GENERATING - NO_FIM <= {route for route, status in fuzzed.seen if status == 200}, line
    assert fuzzed.watch.failures == [], line
    assert daemons.health(live) is not None


# What the fuzzing found at the default body limit, which the fuzzed daemon lowers.


def test_a_prompt_as_large_as_the_default_body_limit_holds_up_no_other_request() -> None:
    """A prompt of one character repeated to the default max_body (16 MiB, the fuzzed daemon's
    is lowered) is answered within CASE_BOUND_S, and short completions sent meanwhile each
    within SHORT_BOUND_S."""
    prompt = "x" * ((16 << 20) - 200)
    big = json.dumps({"model": MODEL, "prompt": prompt, "max_tokens": 1}).encode()
    small = json.dumps({"model": MODEL, "prompt": "Hi", "max_tokens": 1}).encode()
    headers = {"Content-Type": b"application/json"}
    with running_daemon(["--model", MODEL, "--parallel", "2", "--ctx", "512"]) as (_, url):
        answers: list[Answer | OSError] = []

        def ask_big() -> None:
            try:
                answers.append(exchange(url, "POST", "/v1/completions", big, headers, CASE_BOUND_S))
            except OSError as exc:
                answers.append(exc)

        thread = threading.Thread(target=ask_big)
        thread.start()
        beside: list[float] = []
        while thread.is_alive():
            time.sleep(0.5)
            start = time.monotonic()
            try:
                exchange(url, "POST", "/v1/completions", small, headers, CASE_BOUND_S)
            except OSError:
                pass
            beside.append(time.monotonic() - start)
        thread.join()
    (answer,) = answers
    assert max(beside) <= SHORT_BOUND_S, (beside, answer)
    assert isinstance(answer, Answer) and answer.status < 500, answer
