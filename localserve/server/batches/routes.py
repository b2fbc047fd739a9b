"""The Batch API's HTTP face: /v1/files and /v1/batches, in OpenAI's shapes and its error
format (server/http/errors.py). The stores and the runner are made with the app; the runner
starts once the daemon listens (server/daemon.py), since it posts to the daemon's own
address."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

import platformdirs
from aiohttp import web

from localserve.ground.errors import BadRequest
from localserve.ground.settings import APP, OPERATOR_HEADER, Settings
from localserve.server.batches import upload
from localserve.server.batches.files import BATCH, FileStore
from localserve.server.batches.gauges import BatchGauges
from localserve.server.batches.jobs import CANCELLING, RUNNING, JobStore
from localserve.server.batches.lines import (
    ENDPOINTS,
    WINDOWS,
    check_endpoint,
    check_file,
    check_metadata,
    window_seconds,
)
from localserve.server.batches.runner import Runner
from localserve.server.http import guard
from localserve.server.http import validation as v
from localserve.server.http.metrics import METRICS
from localserve.server.http.readers import read_json
from localserve.server.http.refused import Refused
from localserve.server.http.streaming import send_file
from localserve.server.wire import shapes
from localserve.server.wire.declare import Body, Field


@dataclass
class Batches:
    settings: Settings
    files: FileStore
    jobs: JobStore
    runner: Runner


BATCHES = web.AppKey("batches", Batches)


def batches_dir() -> Path:
    """The state folder's `batches/`, beside the saved conversations (ground/settings.py)."""
    return Path(platformdirs.user_state_dir(APP, appauthor=False)) / "batches"


def install(app: web.Application, settings: Settings) -> None:
    root = batches_dir()
    files = FileStore(root / "files", settings.batch_files, settings.batch_file_ttl or 0.0)
    jobs = JobStore(root / "jobs")
    app[BATCHES] = Batches(settings, files, jobs, Runner(files, jobs))
    if METRICS in app:
        app[METRICS].registry.register(BatchGauges(jobs))
    app.on_cleanup.append(stop)
    router = app.router
    router.add_post("/v1/files", create_file)
    router.add_get("/v1/files", list_files)
    router.add_get("/v1/files/{file_id}", get_file)
    router.add_delete("/v1/files/{file_id}", delete_file)
    router.add_get("/v1/files/{file_id}/content", file_content)
    router.add_post("/v1/batches", create_batch)
    router.add_get("/v1/batches", list_batches)
    router.add_get("/v1/batches/{batch_id}", get_batch)
    router.add_post("/v1/batches/{batch_id}/cancel", cancel_batch)


async def start(app: web.Application, url: str) -> None:
    """Run the jobs, against the daemon now listening at `url`. Its lines pass the guard as the
    CLI's requests do: with the operator's token, and the API key if one is set."""
    batches = app[BATCHES]
    headers: dict[str, str] = {}
    token = app[guard.GUARD].operator
    if token:
        headers[OPERATOR_HEADER] = token
    if batches.settings.api_key:
        headers["Authorization"] = f"Bearer {batches.settings.api_key}"
    await batches.runner.start(url, headers)


async def stop(app: web.Application) -> None:
    """Stop the jobs before the server closes its connections: a line cut off by the shutdown
    is run again at the next start, not written down as failed."""
    await app[BATCHES].runner.close()


# -- files ---------------------------------------------------------------------------------------


async def create_file(request: web.Request) -> web.Response:
    batches = request.app[BATCHES]
    stored = await upload.upload(request, batches.files, batches.settings)
    return web.json_response(stored.shape())


async def list_files(request: web.Request) -> web.Response:
    files = request.app[BATCHES].files.all()
    purpose = request.query.get("purpose")
    if purpose:
        files = [f for f in files if f.purpose == purpose]
    if request.query.get("order", "desc") != "asc":
        files.reverse()
    page = _page(request, [f.shape() for f in files], default=10000, most=10000)
    return web.json_response(page)


async def get_file(request: web.Request) -> web.Response:
    stored = request.app[BATCHES].files.get(request.match_info["file_id"])
    return web.json_response(stored.shape())


async def file_content(request: web.Request) -> web.StreamResponse:
    files = request.app[BATCHES].files
    stored = files.get(request.match_info["file_id"])
    headers = {
        "Content-Type": "application/jsonl",
        "Content-Disposition": _attachment(stored.filename),
    }
    try:
        return await send_file(request, files.path(stored.id), headers)
    except FileNotFoundError:  # deleted as it was asked for
        raise Refused(404, f"no file with id '{stored.id}'", "file_id") from None


def _attachment(name: str) -> str:
    """The name in ASCII, and whole in RFC 6266's filename* (upload.py kept it printable)."""
    plain = name.encode("ascii", "replace").decode().replace("?", "_")
    return f"attachment; filename=\"{plain}\"; filename*=UTF-8''{quote(name)}"


async def delete_file(request: web.Request) -> web.Response:
    batches = request.app[BATCHES]
    file_id = request.match_info["file_id"]
    batches.files.get(file_id)
    user = batches.jobs.using(file_id)
    if user is not None:
        raise BadRequest(
            f"file {file_id} is the input of batch {user.id}, which is {user.status}; cancel "
            "it first",
            "file_id",
        )
    batches.files.delete(file_id)
    return web.json_response({"id": file_id, "object": "file", "deleted": True})


# -- batches -------------------------------------------------------------------------------------


def _required(body: v.JSON, key: str) -> str:
    return v.string(body, key, required=True) or ""


BATCH_REQUEST = Body(
    "BatchRequest",
    {
        "input_file_id": Field(shapes.STRING, _required),
        "endpoint": Field({"enum": list(ENDPOINTS)}, _required),
        "completion_window": Field(
            {"enum": list(WINDOWS)}, lambda body, key: (window_seconds(body.get(key)), body[key])
        ),
        "metadata": Field(
            shapes.nullable(shapes.obj({}, additionalProperties=shapes.STRING, maxProperties=16)),
            lambda body, key: check_metadata(body.get(key)),
        ),
    },
    ("input_file_id", "endpoint", "completion_window"),
)


async def create_batch(request: web.Request) -> web.Response:
    batches = request.app[BATCHES]
    got = BATCH_REQUEST.read(await read_json(request))
    file_id, endpoint, metadata = got["input_file_id"], got["endpoint"], got["metadata"]
    window_s, window = got["completion_window"]
    try:
        stored = batches.files.get(file_id)
    except Refused:
        raise Refused(404, f"no file with id '{file_id}'", "input_file_id") from None
    if stored.purpose != BATCH:
        raise BadRequest(
            f"file {file_id} has purpose '{stored.purpose}'; a batch reads a file uploaded "
            "with purpose 'batch'",
            "input_file_id",
        )
    # Checked again: the file may predate a lower batch_lines.
    total, urls = await asyncio.to_thread(
        _check, batches.files, file_id, batches.settings.batch_lines
    )
    check_endpoint(urls, endpoint)
    job = batches.jobs.create(endpoint, file_id, str(window), window_s, metadata, total)
    batches.runner.run(job)
    return web.json_response(job.shape())


def _check(files: FileStore, file_id: str, max_lines: int) -> tuple[int, frozenset[str]]:
    with open(files.path(file_id), "rb") as f:
        return check_file(f, max_lines)


async def list_batches(request: web.Request) -> web.Response:
    jobs = request.app[BATCHES].jobs.all()
    page = _page(request, [j.shape() for j in jobs], default=20, most=100)
    return web.json_response(page)


async def get_batch(request: web.Request) -> web.Response:
    job = request.app[BATCHES].jobs.get(request.match_info["batch_id"])
    return web.json_response(job.shape())


async def cancel_batch(request: web.Request) -> web.Response:
    batches = request.app[BATCHES]
    job = batches.jobs.get(request.match_info["batch_id"])
    if job.status in RUNNING:
        batches.runner.cancel(job)
    elif job.status != CANCELLING:
        raise Refused(409, f"batch {job.id} is {job.status}: it can no longer be cancelled")
    return web.json_response(job.shape())


def _page(request: web.Request, items: list[dict[str, Any]], default: int, most: int) -> Any:
    """OpenAI's list page: `limit` items after the one whose id is `after`."""
    raw = request.query.get("limit")
    try:
        limit = default if raw is None else int(raw)
    except ValueError:
        raise BadRequest("limit must be a whole number", "limit") from None
    if not 1 <= limit <= most:
        raise BadRequest(f"limit must be between 1 and {most}", "limit")
    after = request.query.get("after")
    if after:
        ids = [item["id"] for item in items]
        items = items[ids.index(after) + 1 :] if after in ids else []
    data = items[:limit]
    return {
        "object": "list",
        "data": data,
        "first_id": data[0]["id"] if data else None,
        "last_id": data[-1]["id"] if data else None,
        "has_more": len(items) > limit,
    }
