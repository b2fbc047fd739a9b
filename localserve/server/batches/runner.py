"""Running the batches: each job's lines are posted to the daemon's own endpoint on its loopback
address, as any client's would be, so they take the same path (the guard, the log line, the
metrics, the model manager) and carry `X-Priority: background`, which the engine's scheduler
ranks below interactive work. At most LINES_IN_FLIGHT lines of a job run at once: a batch of
50,000 lines never fills a model's waiting queue (64) and so never turns an editor's request
away with a 503.

Each answer is appended to the job's output (2xx) or error file (any other status, or no answer)
and synced before the line counts as done. A daemon stopped or killed mid-job starts the job
again at its first line with no output or error line; the lines in flight when it stopped are
run again, and none is written twice.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import logging
import time
import uuid
from collections.abc import AsyncGenerator
from contextlib import aclosing
from pathlib import Path
from typing import Any

import aiohttp

from localserve.server.batches import disk
from localserve.server.batches.files import BATCH_OUTPUT, FileStore
from localserve.server.batches.jobs import (
    CANCELLED,
    CANCELLING,
    ENDED,
    EXPIRED,
    FAILED,
    FINALIZING,
    IN_PROGRESS,
    VALIDATING,
    Job,
    JobStore,
)
from localserve.server.batches.lines import Line, done_ids, read_lines

log = logging.getLogger(__name__)

LINES_IN_FLIGHT = 4
# And of all batches together: a quarter of a model's waiting queue (64), the rest left to
# interactive requests however many batches run.
ALL_LINES_IN_FLIGHT = 16
# A 503 is the daemon's "retry later" (a full queue, an engine restarting, a model busy).
RETRIES_503 = (1.0, 2.0, 4.0, 8.0)
SWEEP_EVERY_S = 600.0
READ_AHEAD = 256  # input lines parsed at a time, off the event loop
PRIORITY_HEADER = "X-Priority"


class Runner:
    def __init__(self, files: FileStore, jobs: JobStore) -> None:
        self.files = files
        self.jobs = jobs
        self._url = ""
        self._headers: dict[str, str] = {}
        self._session: aiohttp.ClientSession | None = None
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self._lines: dict[str, set[asyncio.Task[None]]] = {}
        self._records: dict[str, set[asyncio.Task[None]]] = {}
        self._locks: dict[str, asyncio.Lock] = {}
        self._sweeper: asyncio.Task[None] | None = None
        self._all_room = asyncio.Semaphore(ALL_LINES_IN_FLIGHT)

    async def start(self, url: str, headers: dict[str, str]) -> None:
        """Once the daemon listens at `url`: resume the unfinished jobs, expire old files."""
        self._url = url.rstrip("/")
        self._headers = {**headers, PRIORITY_HEADER: "background"}
        # No total timeout: a line runs as long as its model takes, on a loaded machine too.
        timeout = aiohttp.ClientTimeout(total=None, sock_connect=30)
        # Idle connections are let go well before the daemon's idle_timeout (15 s) closes
        # them, so a line is never sent down a connection the daemon is closing.
        connector = aiohttp.TCPConnector(keepalive_timeout=4.0)
        self._session = aiohttp.ClientSession(timeout=timeout, connector=connector)
        for job in reversed(self.jobs.all()):  # oldest first
            if job.status not in ENDED:
                self.run(job)
        self._sweeper = asyncio.create_task(self._sweep_forever())

    async def close(self) -> None:
        """Stop every job where it is (it resumes at the next start) and wait for the lines
        being written."""
        tasks = [*self._tasks.values(), *([self._sweeper] if self._sweeper else [])]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        records = [t for group in self._records.values() for t in group]
        await asyncio.gather(*records, return_exceptions=True)
        if self._session is not None:
            await self._session.close()
            self._session = None

    def run(self, job: Job) -> None:
        """Start (or resume) a job; before `start`, it waits for it."""
        if self._session is not None and job.id not in self._tasks:
            self._tasks[job.id] = asyncio.create_task(self._run(job))

    def cancel(self, job: Job) -> None:
        """Stop a job's lines now (those in flight are abandoned, and their slots freed); what
        was written stays, in its output and error files."""
        job.become(CANCELLING)
        self.jobs.save(job)
        for task in self._lines.get(job.id, ()):
            task.cancel()
        if self._session is not None and job.id not in self._tasks:
            self.run(job)  # a job that was not running finishes now

    # -- a job ---------------------------------------------------------------------------------

    async def _run(self, job: Job) -> None:
        try:
            if job.status == VALIDATING:
                job.become(IN_PROGRESS)
                self.jobs.save(job)
            if job.status == IN_PROGRESS:
                await self._work(job)
            await self._finish(job)
        except asyncio.CancelledError:
            raise  # the daemon stops: the job resumes at its next start
        except Exception as exc:
            log.exception("batch %s failed", job.id)
            job.errors = [{"code": "batch_failed", "message": str(exc), "param": None}]
            job.ending = FAILED
            job.become(FINALIZING)
            self.jobs.save(job)
            await self._finish(job)
        finally:
            self._tasks.pop(job.id, None)

    async def _work(self, job: Job) -> None:
        done = await self._recount(job)
        in_flight = self._lines.setdefault(job.id, set())
        room = asyncio.Semaphore(LINES_IN_FLIGHT)

        def ended(task: asyncio.Task[None]) -> None:
            in_flight.discard(task)
            room.release()
            self._all_room.release()

        if done:
            log.info(
                "batch %s resumes: %d of %d requests were answered", job.id, len(done), job.total
            )
        try:
            async with aclosing(_pending(self.files.path(job.input_file_id), done)) as pending:
                async for line in pending:
                    await room.acquire()
                    await self._all_room.acquire()
                    if job.status != IN_PROGRESS or job.expired(time.time()):
                        room.release()
                        self._all_room.release()
                        break
                    task = asyncio.create_task(self._line(job, line))
                    in_flight.add(task)
                    task.add_done_callback(ended)
            if in_flight:
                await asyncio.wait(set(in_flight))
        finally:
            for task in in_flight:
                task.cancel()
            await asyncio.gather(*in_flight, return_exceptions=True)
            self._lines.pop(job.id, None)
        if job.status != IN_PROGRESS:
            return  # cancelled: _finish hands over what was written
        if job.expired(time.time()):
            await self._expire(job)
            job.ending = EXPIRED
        job.become(FINALIZING)
        self.jobs.save(job)

    async def _finish(self, job: Job) -> None:
        """Hand the output and error files over to /v1/files and end the job."""
        await asyncio.gather(*self._records.get(job.id, ()), return_exceptions=True)
        if job.status in ENDED:
            return
        ending = CANCELLED if job.status == CANCELLING else job.ending
        await self._recount(job)
        adopted = {
            "output_file_id": (self.jobs.output(job.id), job.output_id, "output"),
            "error_file_id": (self.jobs.error_lines(job.id), job.error_id, "error"),
        }
        for attr, (path, file_id, kind) in adopted.items():
            if _has_lines(path) or self.files.path(file_id).exists():
                name = f"{job.id}_{kind}.jsonl"
                # In the event loop, as every change to the stores' indexes is.
                setattr(job, attr, self.files.add(path, name, BATCH_OUTPUT, file_id).id)
        job.become(ending)
        self.jobs.save(job)
        self._records.pop(job.id, None)
        self._locks.pop(job.id, None)
        log.info(
            "batch %s %s: %d of %d requests answered, %d failed",
            job.id,
            ending,
            job.completed,
            job.total,
            job.failed,
        )

    async def _recount(self, job: Job) -> set[str]:
        """The custom_ids already answered, from the files (the counts follow them)."""
        ok, bad = await asyncio.to_thread(self._done, job)
        job.completed, job.failed = len(ok), len(bad)
        return ok | bad

    def _done(self, job: Job) -> tuple[set[str], set[str]]:
        sets = []
        for path, file_id in (
            (self.jobs.output(job.id), job.output_id),
            (self.jobs.error_lines(job.id), job.error_id),
        ):
            if not path.exists() and self.files.path(file_id).exists():
                path = self.files.path(file_id)  # handed over already, before a crash
            sets.append(done_ids(disk.trim_torn_tail(path)))
        return sets[0], sets[1]

    async def _expire(self, job: Job) -> None:
        """OpenAI's way: each request not run within the window gets an error line."""
        done = await self._recount(job)
        error = {"code": "batch_expired", "message": "the batch's completion window ended first"}

        def write() -> int:
            with open(self.files.path(job.input_file_id), "rb") as f:
                entries = [_entry(x, None, error) for x in read_lines(f) if x.custom_id not in done]
            disk.append_lines(self.jobs.error_lines(job.id), entries)  # one sync for them all
            return len(entries)

        job.failed += await asyncio.to_thread(write)

    # -- a line --------------------------------------------------------------------------------

    async def _line(self, job: Job, line: Line) -> None:
        request_id = f"batch_req_{uuid.uuid4().hex[:24]}"
        try:
            status, response = await self._call(line, request_id)
            entry = _entry(line, {"status_code": status, **response}, None)
            failed = status >= 400
        except (aiohttp.ClientError, asyncio.TimeoutError, OSError) as exc:
            error = {"code": "request_failed", "message": f"{type(exc).__name__}: {exc}"}
            entry, failed = _entry(line, None, error), True
        # Once answered, the line is written even if the job is cancelled meanwhile.
        record = asyncio.create_task(self._record(job, entry, failed))
        records = self._records.setdefault(job.id, set())
        records.add(record)
        record.add_done_callback(records.discard)
        await asyncio.shield(record)

    async def _call(self, line: Line, request_id: str) -> tuple[int, dict[str, Any]]:
        assert self._session is not None
        headers = {**self._headers, "X-Request-Id": request_id}
        for pause in (*RETRIES_503, None):
            try:
                status, sent_id, raw = await self._post(line, headers)
            except aiohttp.ServerDisconnectedError:
                # A kept-alive connection closed under the request: once more, on a new one.
                status, sent_id, raw = await self._post(line, headers, fresh=True)
            if status != 503 or pause is None:
                break
            await asyncio.sleep(pause)
        try:
            body: Any = json.loads(raw)
        except ValueError:
            body = {"error": {"message": raw.decode(errors="replace")[:2000], "type": "server"}}
        return status, {"request_id": sent_id, "body": body}

    async def _post(
        self, line: Line, headers: dict[str, str], fresh: bool = False
    ) -> tuple[int, str, bytes]:
        assert self._session is not None
        if fresh:
            headers = {**headers, "Connection": "close"}
        body = line.body
        if "priority" in body:  # the body's field wins the header: a batch stays background
            body = {**body, "priority": "background"}
        async with self._session.post(self._url + line.url, json=body, headers=headers) as r:
            return r.status, r.headers.get("X-Request-Id", headers["X-Request-Id"]), await r.read()

    async def _record(self, job: Job, entry: dict[str, Any], failed: bool) -> None:
        lock = self._locks.setdefault(job.id, asyncio.Lock())
        async with lock:  # one append at a time: lines never interleave
            path = self.jobs.error_lines(job.id) if failed else self.jobs.output(job.id)
            await asyncio.to_thread(disk.append_line, path, entry)
            if failed:
                job.failed += 1
            else:
                job.completed += 1

    # -- expiry --------------------------------------------------------------------------------

    async def _sweep_forever(self) -> None:
        while True:
            try:
                self.sweep(time.time())  # a few unlinks, in the loop that owns the indexes
            except OSError as exc:
                log.warning("cannot sweep the expired batch files: %s", exc)
            await asyncio.sleep(SWEEP_EVERY_S)

    def sweep(self, now: float) -> None:
        """Delete the files past their expiry (but an unfinished job's input), and the jobs
        ended longer ago than a file is kept."""
        for stored in self.files.all():
            if stored.expired(now) and self.jobs.using(stored.id) is None:
                self.files.delete(stored.id)
        ttl = self.files.ttl_s
        for job in self.jobs.all():
            ended_at = job.times.get(f"{job.status}_at")
            if ttl and job.status in ENDED and ended_at is not None and now >= ended_at + ttl:
                self.jobs.remove(job.id)


async def _pending(path: Path, done: set[str]) -> AsyncGenerator[Line, None]:
    """The input's lines not yet answered, read and parsed in a worker thread a chunk at a
    time: a resumed job of 50,000 lines skips its answered ones without stalling the loop."""
    with open(path, "rb") as f:
        lines = read_lines(f)
        while True:
            chunk = await asyncio.to_thread(lambda: list(itertools.islice(lines, READ_AHEAD)))
            for line in chunk:
                if line.custom_id not in done:
                    yield line
            if len(chunk) < READ_AHEAD:
                return


def _entry(
    line: Line, response: dict[str, Any] | None, error: dict[str, str] | None
) -> dict[str, Any]:
    """An output or error line, in OpenAI's shape."""
    return {
        "id": f"batch_req_{uuid.uuid4().hex[:24]}",
        "custom_id": line.custom_id,
        "response": response,
        "error": error,
    }


def _has_lines(path: Path) -> bool:
    try:
        return path.stat().st_size > 0
    except FileNotFoundError:
        return False
