"""The runner against an HTTP endpoint of the test's own on loopback (standing in for the
daemon's, so that what each line sends can be seen): every line carries `X-Priority:
background` and the guard's headers, at most LINES_IN_FLIGHT are in flight, a 4xx answer goes
to the error file and the batch goes on, a 503 is tried again, and a job cancelled mid-way
keeps what it wrote. The stores are the real ones, in a folder of the test's own."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from aiohttp import web

from localserve.server.batches.files import BATCH, FileStore
from localserve.server.batches.jobs import CANCELLED, COMPLETED, ENDED, JobStore
from localserve.server.batches.runner import LINES_IN_FLIGHT, Runner


class Endpoint:
    """An embeddings endpoint that answers after `delay_s`, and keeps what it was sent."""

    def __init__(self, delay_s: float = 0.02) -> None:
        self.delay_s = delay_s
        self.headers: list[dict[str, str]] = []
        self.in_flight = 0
        self.most_in_flight = 0
        self.busy_once: set[str] = set()
        self.priorities: list[str | None] = []

    async def embed(self, request: web.Request) -> web.Response:
        body = await request.json()
        self.priorities.append(body.get("priority"))
        self.headers.append({k.lower(): v for k, v in request.headers.items()})
        self.in_flight += 1
        self.most_in_flight = max(self.most_in_flight, self.in_flight)
        try:
            await asyncio.sleep(self.delay_s)
        finally:
            self.in_flight -= 1
        if body["input"] == "busy" and "busy" not in self.busy_once:
            self.busy_once.add("busy")
            return web.json_response({"error": {"message": "queue full"}}, status=503)
        if body["model"] != "m":
            error = {"message": "no such model", "code": "model_not_found"}
            return web.json_response({"error": error}, status=404)
        return web.json_response({"object": "list", "data": [{"embedding": [0.5]}]})


async def serve(endpoint: Endpoint) -> AsyncIterator[str]:
    app = web.Application()
    app.router.add_post("/v1/embeddings", endpoint.embed)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        await runner.cleanup()


def batch_input(files: FileStore, lines: list[tuple[str, str, str]]) -> str:
    staging = files.staging()
    staging.write_bytes(
        b"".join(
            json.dumps(
                {
                    "custom_id": cid,
                    "method": "POST",
                    "url": "/v1/embeddings",
                    "body": {"model": model, "input": text}
                    | ({"priority": "interactive"} if cid == "pushy" else {}),
                }
            ).encode()
            + b"\n"
            for cid, model, text in lines
        )
    )
    return files.add(staging, "in.jsonl", BATCH).id


def read(files: FileStore, file_id: str | None) -> dict[str, dict[str, Any]]:
    if file_id is None:
        return {}
    entries = [json.loads(raw) for raw in files.path(file_id).read_bytes().splitlines()]
    return {e["custom_id"]: e for e in entries}


async def until_ended(jobs: JobStore, job_id: str) -> None:
    for _ in range(1000):
        if jobs.get(job_id).status in ENDED:
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"{job_id} did not end")


def test_lines_run_at_background_priority_a_few_at_a_time(tmp_path: Path) -> None:
    files, jobs = FileStore(tmp_path / "files", 10, 0.0), JobStore(tmp_path / "jobs")
    lines = [(f"l{i}", "m", f"text {i}") for i in range(20)]
    lines += [("nope", "other", "x"), ("busy", "m", "busy"), ("pushy", "m", "x")]
    file_id = batch_input(files, lines)
    endpoint = Endpoint()

    async def main() -> None:
        async for url in serve(endpoint):
            runner = Runner(files, jobs)
            await runner.start(url, {"X-Localserve-Operator": "token"})
            job = jobs.create("/v1/embeddings", file_id, "24h", 86400, None, len(lines))
            runner.run(job)
            await until_ended(jobs, job.id)
            await runner.close()

    asyncio.run(main())
    (job,) = jobs.all()
    assert job.status == COMPLETED and (job.total, job.completed, job.failed) == (23, 22, 1)
    # A body's own priority would win the header: it is made background too.
    assert set(endpoint.priorities) == {None, "background"}
    assert 1 < endpoint.most_in_flight <= LINES_IN_FLIGHT
    assert all(h["x-priority"] == "background" for h in endpoint.headers)
    assert all(h["x-localserve-operator"] == "token" for h in endpoint.headers)
    assert all(h["x-request-id"].startswith("batch_req_") for h in endpoint.headers)
    outputs, errors = read(files, job.output_file_id), read(files, job.error_file_id)
    assert set(outputs) == {cid for cid, _, _ in lines} - {"nope"}
    assert outputs["busy"]["response"]["status_code"] == 200  # the 503 was tried again
    assert errors["nope"]["response"]["status_code"] == 404
    assert errors["nope"]["response"]["body"]["error"]["code"] == "model_not_found"


def test_a_cancelled_job_keeps_what_it_wrote_and_runs_no_more(tmp_path: Path) -> None:
    files, jobs = FileStore(tmp_path / "files", 10, 0.0), JobStore(tmp_path / "jobs")
    lines = [(f"l{i}", "m", f"text {i}") for i in range(40)]
    file_id = batch_input(files, lines)
    endpoint = Endpoint(delay_s=0.05)

    async def main() -> None:
        async for url in serve(endpoint):
            runner = Runner(files, jobs)
            await runner.start(url, {})
            job = jobs.create("/v1/embeddings", file_id, "24h", 86400, None, len(lines))
            runner.run(job)
            while job.completed < 5:
                await asyncio.sleep(0.01)
            runner.cancel(job)
            await until_ended(jobs, job.id)
            sent = len(endpoint.headers)
            await asyncio.sleep(0.2)
            assert len(endpoint.headers) == sent  # nothing more was sent
            await runner.close()

    asyncio.run(main())
    (job,) = jobs.all()
    assert job.status == CANCELLED and job.times["cancelling_at"] <= job.times["cancelled_at"]
    outputs = read(files, job.output_file_id)
    assert 5 <= job.completed == len(outputs) < 40 and job.failed == 0
    # What a restarted daemon reads is the same: a cancelled job is not run again.
    assert JobStore(tmp_path / "jobs").get(job.id).status == CANCELLED


def test_a_stopped_runner_resumes_without_running_a_line_twice(tmp_path: Path) -> None:
    killed_after = 3
    files, jobs = FileStore(tmp_path / "files", 10, 0.0), JobStore(tmp_path / "jobs")
    lines = [(f"l{i}", "m", f"text {i}") for i in range(24)]
    file_id = batch_input(files, lines)
    endpoint = Endpoint(delay_s=0.05)

    async def first() -> str:
        async for url in serve(endpoint):
            runner = Runner(files, jobs)
            await runner.start(url, {})
            job = jobs.create("/v1/embeddings", file_id, "24h", 86400, None, len(lines))
            runner.run(job)
            while job.completed < killed_after:
                await asyncio.sleep(0.005)
            await runner.close()  # the daemon stops with lines in flight
            return job.id
        raise AssertionError

    job_id = asyncio.run(first())
    stopped = jobs.get(job_id)
    assert stopped.status == "in_progress" and killed_after <= stopped.completed < 24

    async def second() -> None:
        async for url in serve(endpoint):
            again = JobStore(tmp_path / "jobs")
            runner = Runner(FileStore(tmp_path / "files", 10, 0.0), again)
            await runner.start(url, {})
            await until_ended(again, job_id)
            await runner.close()

    asyncio.run(second())
    job = JobStore(tmp_path / "jobs").get(job_id)
    assert job.status == COMPLETED and (job.completed, job.failed) == (24, 0)
    raw = FileStore(tmp_path / "files", 10, 0.0).path(job.output_file_id or "").read_bytes()
    ids = [json.loads(line)["custom_id"] for line in raw.splitlines()]
    assert sorted(ids) == sorted(cid for cid, _, _ in lines)  # each exactly once
