"""The batches in GET /metrics (server/http/metrics.py), read at scrape time: the jobs by
status, and the requests of those not ended yet, all and done, which the web page shows as
its "batches" figure."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator

from prometheus_client.core import GaugeMetricFamily, Metric

from localserve.server.batches.jobs import ENDED, STATUSES, JobStore


class BatchGauges:
    """A prometheus-client collector over the job store."""

    def __init__(self, jobs: JobStore) -> None:
        self.jobs = jobs

    def collect(self) -> Iterator[Metric]:
        jobs = self.jobs.all()
        by_status = Counter(j.status for j in jobs)
        batches = GaugeMetricFamily(
            "localserve_batches", "Batch jobs (/v1/batches) by status", labels=["status"]
        )
        for status in STATUSES:
            batches.add_metric([status], by_status[status])
        yield batches
        running = [j for j in jobs if j.status not in ENDED]
        yield GaugeMetricFamily(
            "localserve_batch_requests",
            "Requests of the batches not ended yet",
            value=sum(j.total for j in running),
        )
        yield GaugeMetricFamily(
            "localserve_batch_requests_done",
            "Requests of the batches not ended yet that were answered or failed",
            value=sum(j.completed + j.failed for j in running),
        )
