"""Expiry, with the real stores in a folder of the test's own: a batch past its completion
window ends `expired`, every request it did not run in its error file (OpenAI's
`batch_expired`); files past their time are swept (but an unfinished batch's input), and so
are the jobs that ended longer ago than a file is kept."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

from localserve.server.batches import disk
from localserve.server.batches.files import BATCH, FileStore
from localserve.server.batches.jobs import COMPLETED, EXPIRED, JobStore
from localserve.server.batches.runner import Runner

DAY = 86400.0


def stores(tmp_path: Path, ttl_s: float = 30 * DAY) -> tuple[FileStore, JobStore]:
    return FileStore(tmp_path / "files", 10, ttl_s), JobStore(tmp_path / "jobs")


def an_input(files: FileStore, tmp_path: Path, ids: list[str]) -> str:
    staging = files.staging()
    body = {"model": "m", "input": "x"}
    staging.write_bytes(
        b"".join(
            json.dumps(
                {"custom_id": i, "method": "POST", "url": "/v1/embeddings", "body": body}
            ).encode()
            + b"\n"
            for i in ids
        )
    )
    return files.add(staging, "in.jsonl", BATCH).id


def test_a_batch_past_its_window_expires_with_an_error_line_for_each_request_not_run(
    tmp_path: Path,
) -> None:
    files, jobs = stores(tmp_path)
    file_id = an_input(files, tmp_path, ["a", "b", "c"])
    job = jobs.create("/v1/embeddings", file_id, "24h", 86400, None, 3)
    # "a" was answered before the window ended (a daemon that was down past it, say).
    jobs.folder(job.id).mkdir(exist_ok=True)
    disk.append_line(jobs.output(job.id), {"custom_id": "a", "response": {"status_code": 200}})
    job.expires_at = int(time.time()) - 1

    asyncio.run(Runner(files, jobs)._run(job))

    assert job.status == EXPIRED and job.times["expired_at"]
    assert (job.total, job.completed, job.failed) == (3, 1, 2)
    errors = [
        json.loads(raw) for raw in files.path(job.error_file_id or "").read_bytes().splitlines()
    ]
    assert {e["custom_id"] for e in errors} == {"b", "c"}
    assert all(e["error"]["code"] == "batch_expired" and e["response"] is None for e in errors)
    assert files.get(job.output_file_id or "").purpose == "batch_output"
    # What a restarted daemon reads back is the same.
    again = JobStore(tmp_path / "jobs").get(job.id)
    assert (again.status, again.output_file_id, again.error_file_id) == (
        EXPIRED,
        job.output_file_id,
        job.error_file_id,
    )


def test_expired_files_and_old_jobs_are_swept_but_a_running_batchs_input_is_kept(
    tmp_path: Path,
) -> None:
    files, jobs = stores(tmp_path, ttl_s=DAY)
    kept_for_job = an_input(files, tmp_path, ["a"])
    stale = an_input(files, tmp_path, ["a"])
    running = jobs.create("/v1/embeddings", kept_for_job, "24h", 86400, None, 1)
    done = jobs.create("/v1/embeddings", stale, "24h", 86400, None, 1)
    done.become(COMPLETED)
    jobs.save(done)
    runner = Runner(files, jobs)

    runner.sweep(time.time() + DAY / 2)
    assert {f.id for f in files.all()} == {kept_for_job, stale}

    runner.sweep(time.time() + DAY + 1)
    assert {f.id for f in files.all()} == {kept_for_job}
    assert not files.path(stale).exists()
    assert {j.id for j in jobs.all()} == {running.id}
    assert not jobs.folder(done.id).exists()
    # A restart finds the same.
    assert {f.id for f in FileStore(tmp_path / "files", 10, DAY).all()} == {kept_for_job}
