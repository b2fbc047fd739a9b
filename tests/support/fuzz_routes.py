"""The routes tests/live/test_fuzz_faces.py fuzzes, read from the app's own router, so that a
route added to the app is fuzzed at once: each with the request it is built from (a body the
route answers, or none), the fields its documented body has, and what keeps a fuzzed request
from changing the daemon under test for the cases after it.

A route without an entry in BASES is fuzzed from an empty body and no path parameters, and
test_every_served_route_has_a_base_request names it. Three steers keep the daemon as it was:
- no fuzzed request unloads, deletes or re-places the served model (short_generations.py keeps
  generations short and keep_alive long; here unload and delete name another model, and a
  load of the served one drops its placement);
- scan and import look only inside the models folder (a scan of "/" walks the disk);
- the shutdown route is fuzzed without a right key (with one it stops the daemon).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any, NamedTuple

from localserve.ground.settings import Settings
from localserve.server.app import build_app
from localserve.server.http.limits import LARGE_BODIES, SMALL_BODY
from localserve.server.openapi.document import DOCUMENT
from tests.support.helpers import MODEL
from tests.support.short_generations import CAP, keep_short

# The fuzzed daemon's limits, lowered from the defaults (16 MiB, 100 MiB) so that bodies at
# and past them are sent and read in a test's time; the 1 MiB of every other route is fixed.
MAX_BODY = 2 << 20
BATCH_FILE_SIZE = 2 << 20
LIMIT_ARGS = ("--max-body", str(MAX_BODY), "--batch-file-size", str(BATCH_FILE_SIZE))

# Stands for an id that the case's setup makes (a file, a batch, a stored response), in a path
# parameter or a body; the client puts the real id in its place.
SETUP_ID = "fuzz-setup-id"
ABSENT = "fuzz-absent"  # a model name the store has not
HI = [{"role": "user", "content": "Hi"}]
# One line of a batch input file that the daemon runs at once.
BATCH_LINE: dict[str, Any] = {
    "custom_id": "fuzz",
    "method": "POST",
    "url": "/v1/chat/completions",
    "body": {"model": MODEL, "messages": HI, "max_tokens": 1},
}


class Route(NamedTuple):
    method: str
    path: str  # as the router names it: /v1/files/{file_id}

    def __str__(self) -> str:
        return f"{self.method} {self.path}"


@dataclass(frozen=True)
class Base:
    """The request a route's cases start from."""

    body: dict[str, Any] | None = None  # JSON; None: the route reads no body
    setup: str | None = None  # what the case makes first: "file", "batch" or "response"
    params: dict[str, str] = field(default_factory=dict)  # the path parameters
    form: bool = False  # a multipart upload: `body` is the form's fields, BATCH_LINE its file

    @property
    def kind(self) -> str:
        return "form" if self.form else "json" if self.body is not None else "bare"


def _get(**params: str) -> Base:
    return Base(params=params)


def _post(body: dict[str, Any], setup: str | None = None) -> Base:
    return Base(body=body, setup=setup)


BASES: dict[Route, Base] = {
    Route("GET", "/health"): _get(),
    Route("GET", "/metrics"): _get(),
    Route("GET", "/openapi.json"): _get(),
    Route("GET", "/ui"): _get(),
    Route("GET", "/ui/"): _get(),
    Route("GET", "/ui/{name}"): _get(name="index.html"),
    Route("GET", "/"): _get(),
    Route("GET", "/api/version"): _get(),
    Route("GET", "/api/tags"): _get(),
    Route("GET", "/api/ps"): _get(),
    Route("GET", "/api/admin/stats"): _get(),
    Route("GET", "/v1/models"): _get(),
    Route("GET", "/v1/models/{model}"): _get(model=MODEL),
    Route("POST", "/v1/chat/completions"): _post(
        {"model": MODEL, "messages": HI, "max_tokens": CAP}
    ),
    Route("POST", "/v1/completions"): _post({"model": MODEL, "prompt": "Hi", "max_tokens": CAP}),
    Route("POST", "/v1/embeddings"): _post({"model": MODEL, "input": "Hi"}),
    Route("POST", "/v1/messages"): _post({"model": MODEL, "messages": HI, "max_tokens": CAP}),
    Route("POST", "/v1/messages/count_tokens"): _post({"model": MODEL, "messages": HI}),
    Route("POST", "/v1/responses"): _post(
        {"model": MODEL, "input": "Hi", "max_output_tokens": CAP}
    ),
    Route("POST", "/v1/responses/compact"): _post(
        {"model": MODEL, "input": "Hi", "max_output_tokens": CAP}
    ),
    Route("GET", "/v1/responses/{id}"): Base(setup="response", params={"id": SETUP_ID}),
    Route("DELETE", "/v1/responses/{id}"): Base(setup="response", params={"id": SETUP_ID}),
    Route("POST", "/api/chat"): _post({"model": MODEL, "messages": HI, "stream": False}),
    Route("POST", "/api/generate"): _post({"model": MODEL, "prompt": "Hi", "stream": False}),
    Route("POST", "/api/embed"): _post({"model": MODEL, "input": "Hi"}),
    Route("POST", "/api/embeddings"): _post({"model": MODEL, "prompt": "Hi"}),
    Route("POST", "/api/show"): _post({"model": MODEL}),
    # The hub the daemon pulls from answers 404 to everything (test_fuzz_faces.py's fixture).
    Route("POST", "/api/pull"): _post({"model": "qwen3:0.6b", "stream": False}),
    Route("DELETE", "/api/delete"): _post({"model": ABSENT}),
    Route("POST", "/api/admin/import"): _post({"path": f"{ABSENT}.gguf", "model": ABSENT}),
    Route("POST", "/api/admin/scan"): _post({"path": "."}),
    Route("POST", "/api/admin/load"): _post({"model": MODEL}),
    Route("POST", "/api/admin/unload"): _post({"model": ABSENT}),
    Route("POST", "/api/admin/pin"): _post({"model": MODEL, "pinned": False}),
    Route("POST", "/api/admin/shutdown"): _get(),
    Route("POST", "/infill"): _post(
        {"model": MODEL, "input_prefix": "def f(", "input_suffix": "):", "n_predict": CAP}
    ),
    Route("POST", "/v1/files"): Base(body={"purpose": "batch"}, form=True),
    Route("GET", "/v1/files"): _get(),
    Route("GET", "/v1/files/{file_id}"): Base(setup="file", params={"file_id": SETUP_ID}),
    Route("DELETE", "/v1/files/{file_id}"): Base(setup="file", params={"file_id": SETUP_ID}),
    Route("GET", "/v1/files/{file_id}/content"): Base(setup="file", params={"file_id": SETUP_ID}),
    Route("POST", "/v1/batches"): _post(
        {"input_file_id": SETUP_ID, "endpoint": "/v1/chat/completions", "completion_window": "24h"},
        setup="file",
    ),
    Route("GET", "/v1/batches"): _get(),
    Route("GET", "/v1/batches/{batch_id}"): Base(setup="batch", params={"batch_id": SETUP_ID}),
    Route("POST", "/v1/batches/{batch_id}/cancel"): Base(
        setup="batch", params={"batch_id": SETUP_ID}
    ),
}
# With a right key it stops the daemon under test: fuzzed up to the guard.
KEYLESS = frozenset({Route("POST", "/api/admin/shutdown")})
# The routes that generate: fuzzed with more cases, since their bodies reach furthest.
GENERATING = frozenset(
    Route("POST", p)
    for p in (
        "/v1/chat/completions",
        "/v1/completions",
        "/v1/messages",
        "/v1/responses",
        "/v1/responses/compact",
        "/api/chat",
        "/api/generate",
        "/infill",
    )
)
# Their names are steered away from the served model.
_SERVED_MODEL_ONLY = {"/api/delete", "/api/admin/unload", "/api/admin/import"}
_SANDBOXED = {"/api/admin/scan", "/api/admin/import"}


def served_routes() -> list[Route]:
    """Every route the app's router serves (HEAD, which aiohttp adds to each GET, aside)."""
    app = build_app(SimpleNamespace(settings=Settings()))  # type: ignore[arg-type]
    routes = {
        Route(r.method, r.resource.canonical)
        for r in app.router.routes()
        if r.resource is not None and r.method != "HEAD"
    }
    return sorted(routes)


def base_of(route: Route) -> Base:
    return BASES.get(route, Base(body={}) if route.method == "POST" else Base())


def body_limit(route: Route) -> int:
    """The most bytes the fuzzed daemon takes in this route's body."""
    if route == Route("POST", "/v1/files"):
        return BATCH_FILE_SIZE
    return MAX_BODY if route.path in LARGE_BODIES else SMALL_BODY


def _operation(route: Route) -> dict[str, Any]:
    item: dict[str, Any] = DOCUMENT["paths"].get(route.path, {})
    return item.get(route.method.lower(), {})


def _properties(schema: dict[str, Any], seen: frozenset[str] = frozenset()) -> set[str]:
    ref = schema.get("$ref")
    if isinstance(ref, str):
        name = ref.rsplit("/", 1)[-1]
        if name in seen:
            return set()
        return _properties(DOCUMENT["components"]["schemas"][name], seen | {name})
    names = set(schema.get("properties", {}))
    for key in ("allOf", "anyOf", "oneOf"):
        for inner in schema.get(key, []):
            names |= _properties(inner, seen)
    return names


def documented_fields(route: Route) -> tuple[str, ...]:
    """The fields of the route's body, as /openapi.json documents them."""
    content = _operation(route).get("requestBody", {}).get("content", {})
    return tuple(sorted(set().union(*(_properties(m["schema"]) for m in content.values()))))


def documented_query(route: Route) -> tuple[str, ...]:
    params = _operation(route).get("parameters", [])
    return tuple(sorted(p["name"] for p in params if p.get("in") == "query"))


def _names_served(value: object) -> bool:
    return isinstance(value, str) and MODEL in value.lower()


def steer(route: Route, body: dict[str, Any]) -> None:
    """Keep the daemon as it was for the next case (see the docstring), in place."""
    keep_short(route.path, body)
    if route.path in _SERVED_MODEL_ONLY:
        for key in ("model", "name"):
            if _names_served(body.get(key)):
                body[key] = ABSENT
    if route.path == "/api/admin/load" and any(
        _names_served(body.get(k)) for k in ("model", "name")
    ):
        body.pop("device", None)
        body.pop("num_gpu", None)
    if route.path in _SANDBOXED and isinstance(body.get("path"), str):
        inside = body["path"].replace("..", "__").lstrip("/")
        body["path"] = os.path.join(os.environ["LOCALSERVE_MODELS"], inside)
