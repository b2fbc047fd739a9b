"""GET /metrics: Prometheus' text format, written by prometheus-client.

Two kinds of figure:
- **Counted per request**, when it ends (`Metrics.finished`, from request_log.py): requests by
  face, model and status; prompt, cached and generated tokens; generations by priority class;
  time to first token, time per output token, queue wait and end-to-end latency as histograms.
- **Read at scrape time** (`_Live`): what the manager, the pools and the workers hold now
  (sequences running and waiting, batch sizes per step, loads, evictions, load seconds, swap
  waits, pool budgets and reservations, prompt caches, worker restarts). Nothing is kept
  current on the step path for these: the runner tallies a step's batch size in a dict, and
  the rest are fields the daemon keeps anyway.

One registry per app, so daemons in one process (tests) do not share counters.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from aiohttp import web
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Histogram,
    generate_latest,
)
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)

from localserve.engine.residency.manager import ModelManager
from localserve.server.http.record import Record
from localserve.server.http.state import MANAGER

# Seconds: from a cached prompt's first token (~10 ms) to a long prompt on 2 cores (a minute).
LATENCY = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0)
PER_TOKEN = (0.005, 0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28)
BATCH = (1, 2, 4, 8, 16, 32, 64, 128)


class Metrics:
    def __init__(self, manager: ModelManager) -> None:
        self.registry = CollectorRegistry(auto_describe=False)
        r = self.registry
        self.requests = Counter(
            "localserve_requests",
            "Requests answered, by face, model and HTTP status",
            ["face", "model", "status"],
            registry=r,
        )
        self.prompt_tokens = Counter(
            "localserve_prompt_tokens", "Prompt tokens, cached ones included", ["model"], registry=r
        )
        self.cached_tokens = Counter(
            "localserve_prompt_cached_tokens",
            "Prompt tokens found in a slot or the prompt cache, not prefilled",
            ["model"],
            registry=r,
        )
        self.generated_tokens = Counter(
            "localserve_generated_tokens", "Tokens generated", ["model"], registry=r
        )
        self.generations = Counter(
            "localserve_generations",
            "Generations ended, by model and the priority class the engine ran them at "
            "(interactive, or background: batches and requests that ask for it)",
            ["model", "priority"],
            registry=r,
        )
        self.ttft = Histogram(
            "localserve_time_to_first_token_seconds",
            "From the request's queueing to its first token",
            ["model"],
            buckets=LATENCY,
            registry=r,
        )
        self.tpot = Histogram(
            "localserve_time_per_output_token_seconds",
            "Mean time between tokens after the first",
            ["model"],
            buckets=PER_TOKEN,
            registry=r,
        )
        self.queue_wait = Histogram(
            "localserve_queue_wait_seconds",
            "Time a sequence waited for a slot",
            ["model"],
            buckets=LATENCY,
            registry=r,
        )
        self.duration = Histogram(
            "localserve_request_duration_seconds",
            "End to end, from the request's arrival to its last byte",
            ["face", "model"],
            buckets=LATENCY,
            registry=r,
        )
        r.register(_Live(manager))

    def finished(self, record: Record) -> None:
        model = record.model or "-"
        self.requests.labels(record.face, model, str(record.status)).inc()
        if record.sequence is None:
            return
        seq = record.sequence
        self.prompt_tokens.labels(model).inc(seq.prompt_tokens)
        self.cached_tokens.labels(model).inc(seq.cached_tokens)
        self.generated_tokens.labels(model).inc(seq.completion_tokens)
        priority = "background" if seq.params.background else "interactive"
        self.generations.labels(model, priority).inc()
        timings = seq.timings()
        self.queue_wait.labels(model).observe(timings.queued_s)
        if timings.ttft_s is not None:
            self.ttft.labels(model).observe(timings.ttft_s)
            if seq.finished_at is not None and timings.per_token_s is not None:
                self.tpot.labels(model).observe(timings.per_token_s)
        self.duration.labels(record.face, model).observe(record.seconds)


class _Live:
    """The figures read from the daemon's state at each scrape."""

    def __init__(self, manager: ModelManager) -> None:
        self.manager = manager

    def collect(self) -> Iterator[Metric]:
        manager = self.manager
        running = GaugeMetricFamily(
            "localserve_sequences_running", "Sequences in a slot", labels=["model"]
        )
        waiting = GaugeMetricFamily(
            "localserve_sequences_waiting", "Sequences queued for a slot", labels=["model"]
        )
        batch = HistogramMetricFamily(
            "localserve_batch_size",
            "Sequences in one step of the model's batcher",
            labels=["model"],
        )
        hits = CounterMetricFamily(
            "localserve_prompt_cache_hits",
            "Conversations resumed from the prompt cache",
            labels=["model"],
        )
        restored = CounterMetricFamily(
            "localserve_prompt_cache_restored_tokens",
            "Tokens restored from the prompt cache",
            labels=["model"],
        )
        cache_bytes = GaugeMetricFamily(
            "localserve_prompt_cache_bytes", "Memory the prompt cache holds", labels=["model"]
        )
        drafted = CounterMetricFamily(
            "localserve_draft_tokens",
            "Draft tokens verified (speculative decoding by prompt lookup)",
            labels=["model"],
        )
        accepted = CounterMetricFamily(
            "localserve_draft_tokens_accepted", "Draft tokens the model kept", labels=["model"]
        )
        acceptance = GaugeMetricFamily(
            "localserve_draft_acceptance_ratio",
            "Share of draft tokens the model kept, since it loaded",
            labels=["model"],
        )
        preempted = CounterMetricFamily(
            "localserve_preemptions",
            "Background sequences that yielded their slot to interactive ones",
            labels=["model"],
        )
        for model in manager.models:
            stats = model.runner.stats()
            preempted.add_metric([model.name], stats.get("preemptions", 0))
            running.add_metric([model.name], stats["running"])
            waiting.add_metric([model.name], stats["queued"])
            sizes = stats.get("batch_sizes") or {}
            buckets = [(str(b), sum(n for size, n in sizes.items() if size <= b)) for b in BATCH]
            count = sum(sizes.values())
            batch.add_metric(
                [model.name],
                [*buckets, ("+Inf", count)],
                sum(size * n for size, n in sizes.items()),
            )
            cache = stats.get("prompt_cache") or {}
            hits.add_metric([model.name], cache.get("hits", 0))
            restored.add_metric([model.name], cache.get("tokens_restored", 0))
            cache_bytes.add_metric([model.name], cache.get("bytes", 0))
            if (spec := stats.get("speculation")) is not None:
                drafted.add_metric([model.name], spec["drafted"])
                accepted.add_metric([model.name], spec["accepted"])
                acceptance.add_metric([model.name], spec["accepted"] / max(1, spec["drafted"]))
        yield from (running, waiting, batch, hits, restored, cache_bytes)
        yield from (drafted, accepted, acceptance, preempted)
        yield from self._residency()
        yield from self._pools()
        yield from self._workers()

    def _residency(self) -> Iterator[Metric]:
        tally = self.manager.tally
        families: list[tuple[str, str, Mapping[str, float]]] = [
            ("localserve_model_loads", "Loads of a model", self.manager.load_counts),
            (
                "localserve_model_evictions",
                "Unloads of an idle model to make room for another",
                tally.evictions,
            ),
            ("localserve_model_load_seconds", "Seconds spent loading a model", tally.load_seconds),
            (
                "localserve_swap_waits",
                "Requests whose model waited for room (a swap)",
                tally.swap_waits,
            ),
            (
                "localserve_swap_wait_seconds",
                "Seconds requests waited for room",
                tally.swap_wait_seconds,
            ),
        ]
        for name, text, values in families:
            family = CounterMetricFamily(name, text, labels=["model"])
            for model, value in sorted(values.items()):
                family.add_metric([model], value)
            yield family

    def _pools(self) -> Iterator[Metric]:
        budget = GaugeMetricFamily(
            "localserve_pool_budget_bytes", "Memory models may take", labels=["device"]
        )
        reserved = GaugeMetricFamily(
            "localserve_pool_reserved_bytes",
            "Memory reserved for loaded models (their estimates)",
            labels=["device"],
        )
        actual = GaugeMetricFamily(
            "localserve_pool_actual_bytes",
            "Memory the runtimes report allocating",
            labels=["device"],
        )
        used: dict[str, int] = {}
        for model in self.manager.models:
            for pool, size in model.placement.actual(model.buffers).items():
                used[pool] = used.get(pool, 0) + size
        for device, device_pool in self.manager.pools.items():
            budget.add_metric([device], device_pool.budget)
            reserved.add_metric([device], device_pool.used)
            actual.add_metric([device], used.get(device, 0))
        yield from (budget, reserved, actual)

    def _workers(self) -> Iterator[Metric]:
        restarts = CounterMetricFamily(
            "localserve_worker_restarts",
            "Engine worker deaths (each followed by a restart)",
            labels=["device"],
        )
        cause = GaugeMetricFamily(
            "localserve_worker_last_failure",
            "1, labelled with the last cause of a worker's death",
            labels=["device", "cause"],
        )
        sent = CounterMetricFamily(
            "localserve_worker_messages",
            "Messages the daemon sent to "
            "its engine workers, by kind (Submit, Tokenize, Cancel, ...)",
            labels=["device", "kind"],
        )
        for device, health in sorted(self.manager.loader.health().items()):
            restarts.add_metric([device], health.get("restarts", 0))
            if health.get("last_cause"):
                cause.add_metric([device, str(health["last_cause"])], 1)
            for kind, n in sorted(health.get("sent", {}).items()):
                sent.add_metric([device, kind], n)
        yield from (restarts, cause, sent)


METRICS = web.AppKey("metrics", Metrics)


async def metrics(request: web.Request) -> web.Response:
    body = generate_latest(request.app[METRICS].registry)
    return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})


def install(app: web.Application) -> None:
    app[METRICS] = Metrics(app[MANAGER])
    app.router.add_get("/metrics", metrics)
