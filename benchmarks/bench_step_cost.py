"""Step cost: what a step of one slot costs with k draft tokens to verify, against a lone decode
token, and so the most prompt-lookup drafting can gain on this machine at one stream.

Each model is loaded through the engine's own backend (one slot, 2 threads), its slot filled
with a prompt of `--cells` tokens, then steps of 1, 2, 5 and 9 rows (0, 1, 4 and 8 drafts)
alternate, each rolled back after it. If every draft were kept, a step of k+1 rows would give
k+1 tokens, so the ceiling of speculation at c=1 is (k+1) x lone step / (k+1)-row step: the
bound behind bench_speculative's c=1 figure (issue #27 asks >= 1.6x), before any draft is lost.

    python -m benchmarks.bench_step_cost               # writes docs/benchmarks.md
    python -m benchmarks.bench_step_cost --no-write
"""

from __future__ import annotations

import argparse
import statistics
import time

from benchmarks._common import cli, command, publish
from localserve.backends.llama_cpp import LlamaCppBackend
from localserve.ground.sampling import SamplingParams
from localserve.ground.step import StepChunk, StepPlan
from localserve.store.resolve import resolve
from tests.support import in_process
from tests.support.residency_support import gemma_file

MARKERS = ("<!-- bench_step_cost:start -->", "<!-- bench_step_cost:end -->")
ROWS = (1, 2, 5, 9)
BATCH = 512


def model_path(name: str) -> str:
    return gemma_file() if name == "gemma3" else resolve(name).path


def step_times(name: str, cells: int, rounds: int) -> dict[int, float]:
    """Median milliseconds of a step of each size in ROWS, at `cells` cells of one slot."""
    # As the daemon loads: with the buffer types the probe's verdict allows on this CPU.
    options = in_process.options(n_slots=1, n_ctx_slot=cells + BATCH, n_batch=BATCH)
    backend = LlamaCppBackend(name, model_path(name), options)
    try:
        # Token ids spread over the vocabulary: the attention's cost does not depend on text.
        prompt = [(i * 7919) % (backend.n_vocab - 200) + 100 for i in range(cells)]
        backend.seq_start(0, SamplingParams(temperature=0.0), prompt)
        for at in range(0, cells, BATCH):
            chunk = prompt[at : at + BATCH]
            backend.step(StepPlan([StepChunk(0, chunk, at, sample=at + BATCH >= cells)]))
        times: dict[int, list[float]] = {rows: [] for rows in ROWS}
        for _ in range(rounds):
            for rows in ROWS:
                plan = StepPlan([StepChunk(0, prompt[:rows], cells, True, drafts=rows - 1)])
                start = time.perf_counter()
                backend.step(plan)
                times[rows].append((time.perf_counter() - start) * 1000)
                backend.seq_trim(0, cells)
        return {rows: statistics.median(ms) for rows, ms in times.items()}
    finally:
        backend.close()


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--models", default="smollm2,gemma3", help="comma-separated")
    p.add_argument("--cells", type=int, default=1200, help="the slot's cells before each step")
    p.add_argument("--rounds", type=int, default=15, help="steps of each size, alternating")
    p.add_argument("--no-write", action="store_true", help="do not update docs/benchmarks.md")
    args = p.parse_args(argv)
    table = [
        "| model | rows in the step | drafts | step, median (ms) | ceiling if all drafts kept |",
        "|---|---:|---:|---:|---:|",
    ]
    for name in args.models.split(","):
        ms = step_times(name, args.cells, args.rounds)
        for rows, cost in ms.items():
            row = f"| {name} | {rows} | {rows - 1} | {cost:.1f} | {rows * ms[1] / cost:.2f}x |"
            print(row, flush=True)
            table.append(row)
    facts = [
        f"Command: `{' '.join(command(__file__, argv))}`",
        f"One slot at {args.cells} cells, 2 threads, through the engine's backend; each step "
        f"rolled back after it; {args.rounds} alternating rounds. *Ceiling*: rows x lone step "
        "/ this step, the speed-up speculation would give at one stream if every draft were "
        "kept (bench_speculative gives the drafts actually kept).",
    ]
    publish(
        MARKERS,
        "## Step cost: the ceiling of drafting at one stream (`bench_step_cost.py`)",
        facts,
        table,
        not args.no_write,
    )
    return 0


if __name__ == "__main__":
    cli(main)
