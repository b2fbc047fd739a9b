"""Each upstream's state in /metrics, read at scrape time from the registry (as the http
edge's `_Live` reads the manager): up or not, failures in a row, requests in flight."""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import GaugeMetricFamily, Metric

from localserve.server.upstream.breaker import CLOSED
from localserve.server.upstream.registry import Registry


class UpstreamGauges:
    def __init__(self, registry: Registry) -> None:
        self.registry = registry

    def collect(self) -> Iterator[Metric]:
        up = GaugeMetricFamily(
            "localserve_upstream_up",
            "1 while the upstream's breaker is closed, 0 while it is open or on trial",
            labels=["upstream"],
        )
        failures = GaugeMetricFamily(
            "localserve_upstream_failures",
            "Failures in a row of the upstream's requests and probes",
            labels=["upstream"],
        )
        in_flight = GaugeMetricFamily(
            "localserve_upstream_in_flight",
            "Requests forwarded to the upstream and not answered yet",
            labels=["upstream"],
        )
        for u in self.registry.upstreams:
            up.add_metric([u.name], 1.0 if u.breaker.state == CLOSED else 0.0)
            failures.add_metric([u.name], float(u.breaker.failures))
            in_flight.add_metric([u.name], float(sum(u.in_flight.values())))
        yield from (up, failures, in_flight)
