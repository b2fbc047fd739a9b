"""The jobs of /v1/batches, under the state folder's `batches/jobs/ID/`: `job.json` (the
record, rewritten atomically at each change of status), and `output.jsonl` and `errors.jsonl`,
a line appended and synced as each request ends. The files are the truth about progress: a
restarted daemon counts them again and resumes with the lines they lack.

Statuses are OpenAI's. validating → in_progress → finalizing → completed; cancelling →
cancelled; in_progress → expired past the completion window; failed when the input cannot be
run at all. `ending` is what a finalizing job becomes, kept so that a crash while the files
are handed over finishes the same way after a restart."""

from __future__ import annotations

import shutil
import time
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from localserve.server.batches import disk
from localserve.server.batches.files import new_file_id
from localserve.server.http.refused import Refused

VALIDATING, IN_PROGRESS, FINALIZING = "validating", "in_progress", "finalizing"
COMPLETED, FAILED, EXPIRED = "completed", "failed", "expired"
CANCELLING, CANCELLED = "cancelling", "cancelled"
# OpenAI's statuses, in the order a batch moves through them.
STATUSES = (VALIDATING, IN_PROGRESS, FINALIZING, COMPLETED, FAILED, EXPIRED, CANCELLING, CANCELLED)
ENDED = frozenset({COMPLETED, FAILED, EXPIRED, CANCELLED})
# Statuses whose lines are still to be run.
RUNNING = frozenset({VALIDATING, IN_PROGRESS})


@dataclass
class Job:
    id: str
    endpoint: str
    input_file_id: str
    completion_window: str
    created_at: int
    expires_at: int
    metadata: dict[str, str] | None
    status: str = VALIDATING
    total: int = 0
    completed: int = 0
    failed: int = 0
    # When each status began: in_progress_at, finalizing_at, completed_at, ...
    times: dict[str, int] = field(default_factory=dict)
    ending: str = COMPLETED
    errors: list[dict[str, Any]] | None = None
    # Chosen at creation, shown once the files are handed over at the end.
    output_id: str = field(default_factory=new_file_id)
    error_id: str = field(default_factory=new_file_id)
    output_file_id: str | None = None
    error_file_id: str | None = None

    def become(self, status: str, now: float | None = None) -> None:
        self.status = status
        self.times[f"{status}_at"] = int(time.time() if now is None else now)

    def expired(self, now: float) -> bool:
        return now >= self.expires_at

    def shape(self) -> dict[str, Any]:
        """OpenAI's batch object."""
        times = {
            f"{s}_at": self.times.get(f"{s}_at")
            for s in (IN_PROGRESS, FINALIZING, COMPLETED, FAILED, EXPIRED, CANCELLING, CANCELLED)
        }
        return {
            "id": self.id,
            "object": "batch",
            "endpoint": self.endpoint,
            "errors": {"object": "list", "data": self.errors} if self.errors else None,
            "input_file_id": self.input_file_id,
            "completion_window": self.completion_window,
            "status": self.status,
            "output_file_id": self.output_file_id,
            "error_file_id": self.error_file_id,
            "created_at": self.created_at,
            "expires_at": self.expires_at,
            **times,
            "request_counts": {
                "total": self.total,
                "completed": self.completed,
                "failed": self.failed,
            },
            "metadata": self.metadata,
        }


class JobStore:
    """The jobs, all in memory (a record each; their lines stay on disk)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        root.mkdir(parents=True, exist_ok=True)
        self._jobs: dict[str, Job] = {}
        for job in disk.read_records(root.glob("batch_*/job.json"), Job):
            self._jobs[job.id] = job

    def create(
        self,
        endpoint: str,
        input_file_id: str,
        window: str,
        window_s: int,
        metadata: dict[str, str] | None,
        total: int,
    ) -> Job:
        now = int(time.time())
        job = Job(
            f"batch_{uuid.uuid4().hex[:24]}",
            endpoint,
            input_file_id,
            window,
            now,
            now + window_s,
            metadata,
            total=total,
        )
        self.folder(job.id).mkdir(parents=True)
        self.save(job)
        self._jobs[job.id] = job
        return job

    def folder(self, job_id: str) -> Path:
        return self.root / job_id

    def output(self, job_id: str) -> Path:
        return self.folder(job_id) / "output.jsonl"

    def error_lines(self, job_id: str) -> Path:
        return self.folder(job_id) / "errors.jsonl"

    def save(self, job: Job) -> None:
        disk.write_json(self.folder(job.id) / "job.json", asdict(job))

    def get(self, job_id: str) -> Job:
        job = self._jobs.get(job_id)
        if job is None:
            raise Refused(404, f"no batch with id '{job_id}'", "batch_id")
        return job

    def all(self) -> list[Job]:
        """Newest first, as OpenAI lists batches."""
        return sorted(self._jobs.values(), key=lambda j: (j.created_at, j.id), reverse=True)

    def remove(self, job_id: str) -> None:
        self._jobs.pop(job_id, None)
        shutil.rmtree(self.folder(job_id), ignore_errors=True)

    def using(self, file_id: str) -> Job | None:
        """An unfinished job that reads `file_id`, if any: its input may not go yet."""
        return next(
            (
                j
                for j in self._jobs.values()
                if j.input_file_id == file_id and j.status not in ENDED
            ),
            None,
        )
