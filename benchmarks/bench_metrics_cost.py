"""What keeping the metrics current costs, measured directly: the work /metrics adds to each
request (counters and histograms at its end, its log line) and to each step (the batch-size
tally), against the time of a step and of a request it rides on.

End to end, `bench_serving.py --metrics-overhead` compares daemons with /metrics on and off,
but on this shared machine its pairs scatter by ±15 %, far wider than the 2 % it should
resolve; these figures bound the overhead from below that noise.

    python -m benchmarks.bench_metrics_cost            # writes docs/benchmarks.md
"""

from __future__ import annotations

import argparse
import logging
import time
from collections import Counter
from types import SimpleNamespace

from benchmarks._common import cli, publish
from localserve.engine.batching.sequence import Sequence
from localserve.ground.sampling import SamplingParams
from localserve.server.http.metrics import Metrics
from localserve.server.http.record import Record

START, END = "<!-- bench_metrics_cost:start -->", "<!-- bench_metrics_cost:end -->"
# A step at 16 streams on SmolLM2 here takes ~110 ms (bench_serving: ~140 tok/s at 16).
STEP_S = 16 / 140


def per_call(func, n: int) -> float:
    t0 = time.perf_counter()
    for _ in range(n):
        func()
    return (time.perf_counter() - t0) / n


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--no-write", action="store_true")
    args = p.parse_args(argv)
    metrics = Metrics(SimpleNamespace(models=[], pools={}, tally=None, load_counts={}))
    seq = Sequence(list(range(40)), SamplingParams(), 64, None)
    seq.generated = list(range(64))
    seq.first_token_at, seq.finished_at = seq.created_at + 0.2, seq.created_at + 2.0
    record = Record(
        "id", "openai", "/v1/chat/completions", time.monotonic(), "smollm2", seq, 200, 2.1
    )
    logger = logging.getLogger("bench")
    logger.addHandler(logging.NullHandler())
    logger.propagate = False
    logger.setLevel(logging.INFO)
    finished = per_call(lambda: metrics.finished(record), 20000)
    line = per_call(
        lambda: logger.info("request %s", record.line(), extra={"request": record.fields()}), 20000
    )
    tally: Counter[int] = Counter()
    step = per_call(lambda: tally.__setitem__(16, tally[16] + 1), 200000)
    request_s = 2.0
    rows = [
        f"| per request: counters and histograms | {finished * 1e6:.1f} µs | "
        f"{finished / request_s:.4%} of a {request_s:.0f} s request |",
        f"| per request: its log line | {line * 1e6:.1f} µs | {line / request_s:.4%} |",
        f"| per step: the batch-size tally | {step * 1e9:.0f} ns | "
        f"{step / STEP_S:.6%} of a {STEP_S * 1e3:.0f} ms step |",
    ]
    publish(
        (START, END),
        "## What the metrics cost (`bench_metrics_cost.py`)",
        [
            "The work /metrics and the request log add, timed in-process (mean of 20,000 calls; "
            "the tally 200,000). Everything else /metrics shows is read when it is scraped.",
        ],
        ["| what | cost | share |", "|---|---:|---:|", *rows],
        not args.no_write,
    )
    return 0


if __name__ == "__main__":
    cli(main)
