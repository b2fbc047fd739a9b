"""/openapi.json, and schemathesis run against a live daemon with it (issue #16, part 5).

The daemon serves the embedded SmolLM2 (2 slots of 512 tokens). schemathesis takes the
document the daemon serves, generates valid and invalid requests for every operation (its
examples, coverage and fuzzing phases) and checks each answer: never a 5xx, a status the
document lists, a content type it lists, and a body that matches its schema. Afterwards the
daemon must still answer /health.

Bounded to run in a few minutes on 2 cores: MAX_EXAMPLES fuzzed cases an operation, and every
generation capped at CAP tokens (`steer`), so the generation endpoints stay in.
"""

from __future__ import annotations

import os
import subprocess
from collections import Counter
from collections.abc import Iterator
from types import SimpleNamespace

import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from localserve.ground.settings import Settings
from localserve.server.app import build_app
from localserve.server.openapi.document import DOCUMENT
from tests.support import daemons
from tests.support.helpers import MODEL
from tests.support.live import running_daemon
from tests.support.short_generations import keep_short

Daemon = tuple[subprocess.Popen, str]

ARGS = ["--model", MODEL, "--parallel", "2", "--ctx", "512"]
# The same cases every run, so that CI fails only for a change; a longer hunt at random:
# LOCALSERVE_TEST_FUZZ_EXAMPLES=200.
HUNT = int(os.environ.get("LOCALSERVE_TEST_FUZZ_EXAMPLES", "0"))
MAX_EXAMPLES = HUNT or 15
CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
]
# Not fuzzed, and why (they stay in the document):
NOT_FUZZED = {
    "/api/admin/shutdown": "it stops the daemon under test",
    "/api/delete": "it would delete the store's models, the served one among them",
    "/api/pull": "it downloads: the network is absent here, and a catalog name would leave a "
    "partial file behind",
}
# scan and import are fuzzed inside the daemon's models folder: a scan of "/" walks the disk.
SANDBOXED = ("/api/admin/scan", "/api/admin/import")
SEEN: Counter[tuple[str, int]] = Counter()
# The routes that generate and that fuzzed bodies reach the model through (/infill's fuzzed
# bodies never hold a usable prompt, so it answers only 400s).
GENERATING = (
    "POST /v1/chat/completions",
    "POST /v1/completions",
    "POST /v1/responses",
    "POST /v1/messages",
    "POST /api/chat",
    "POST /api/generate",
)


@pytest.fixture(scope="module")
def live() -> Iterator[Daemon]:
    with running_daemon(ARGS) as served:
        yield served


# The document the daemon serves (test_the_document_is_served checks that it is this one),
# loaded here and not from the daemon: schemathesis' from_fixture, which would load it from
# the live daemon, reads a pytest node attribute that pytest 9.2 no longer has.
CONFIG = schemathesis.Config.from_dict(
    {
        "phases": {"stateful": {"enabled": False}},
        "generation": {"mode": "all", "max-examples": MAX_EXAMPLES, "deterministic": not HUNT},
        "output": {"sanitization": {"enabled": False}},  # it hides every field named *token*
    }
)
schema = schemathesis.openapi.from_dict(DOCUMENT, config=CONFIG).exclude(path=list(NOT_FUZZED))


def steer(case) -> None:
    """Every generation stops within CAP tokens and no request unloads the model
    (short_generations.py); scan and import look only inside the models folder; and a fuzzed
    body names the served model (the coverage phase tries other names), so that most reach the
    handler past its 404."""
    body, path = case.body, case.operation.path
    if not isinstance(body, dict):
        return
    if case.meta is not None and case.meta.phase.name.value == "fuzzing":
        for key in ("model", "name"):
            if isinstance(body.get(key), str) and body[key]:
                body[key] = MODEL
    keep_short(path, body)
    if path in SANDBOXED and isinstance(body.get("path"), str):
        inside = body["path"].replace("..", "__").lstrip("/")
        body["path"] = os.path.join(os.environ["LOCALSERVE_MODELS"], inside)


@schema.parametrize()
@settings(
    max_examples=MAX_EXAMPLES,
    deadline=None,
    derandomize=not HUNT,
    database=None,
    suppress_health_check=list(HealthCheck),
)
def test_every_answer_matches_the_document(case, live: Daemon) -> None:
    steer(case)
    response = case.call(base_url=live[1], timeout=60)
    SEEN[(case.operation.label, response.status_code)] += 1
    case.validate_response(response, checks=CHECKS)


def test_the_daemon_survived(live: Daemon) -> None:
    proc, url = live
    assert proc.poll() is None, daemons.log_text(proc.log_path)
    assert daemons.health(url) is not None


def test_the_fuzzing_called_every_operation_and_reached_the_model() -> None:
    """What the fuzzing above saw (so this runs after it, in the same session; alone it fails):
    every operation it fuzzes answered, and some fuzzed body of each generating route got past
    the checks to a model's answer."""
    print(
        "\nschemathesis, cases by answer:",
        ", ".join(f"{op} {status}: {n}" for (op, status), n in sorted(SEEN.items())),
    )
    fuzzed = {operation.ok().label for operation in schema.get_all_operations()}
    assert {op for op, _ in SEEN} == fuzzed
    # `steer` keeps fuzzed generations short enough to run: each generating route answered.
    assert set(GENERATING) <= {op for op, status in SEEN if status == 200}, SEEN
    assert any(400 <= status < 500 for _, status in SEEN), SEEN


def test_every_route_is_documented() -> None:
    """The document names every route the app serves, and no other."""
    app = build_app(SimpleNamespace(settings=Settings()))
    served = {
        (r.method.lower(), r.resource.canonical) for r in app.router.routes() if r.method != "HEAD"
    }
    documented = {(m, p) for p, item in DOCUMENT["paths"].items() for m in item}
    assert served == documented


def test_the_document_is_served(live: Daemon) -> None:
    _, url = live
    assert daemons.get_json(f"{url}/openapi.json") == DOCUMENT
