"""Swap-back benchmark: a conversation's next turn after its model was swapped out and back in.

Two models, a budget that holds one (`--max-loaded-models 1`), and conversations of about 2,000
tokens on each; every request goes to the other model than the last, so every request swaps.
A returning turn's TTFT (load included) is measured with the saved conversations on and off
(`--saved-conversations 0`), in alternating rounds, each with a fresh state folder. A third run
with both models resident (no swap) gives the answers a restore must reproduce, greedy.

The second model is a byte copy of SmolLM2 under another name: Gemma 3, the other test model,
has sliding-window layers, whose cells llama.cpp keeps only for the window, so it gets no prompt
cache at all (docs/architecture.md).

    python -m benchmarks.bench_swap_back                # writes docs/benchmarks.md
    python -m benchmarks.bench_swap_back --rounds 1 --no-write
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shlex
import shutil
import statistics
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp

from benchmarks._common import (
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

MARKERS = ("<!-- bench_swap_back:start -->", "<!-- bench_swap_back:end -->")
SLOTS, CTX = 2, 4096
CONVERSATIONS = 2  # per model
TURNS = 4
ANSWER_TOKENS = 32
QUESTIONS = [
    "Which city comes first?",
    "Which city comes last?",
    "Name three cities from the middle.",
    "How many cities are there?",
]


def document(model: str, conv: int) -> str:
    """About 1,900 tokens of facts, different for every conversation."""
    facts = " ".join(
        f"Fact {i}: the river number {conv} of {model} passes city {i * 7 + conv}."
        for i in range(140)
    )
    return f"Here is a document.\n{facts}\nAnswer briefly."


@dataclass
class Conversation:
    model: str
    messages: list[dict[str, str]]


@dataclass
class Run:
    ttft_s: list[float] = field(default_factory=list)  # returning turns only
    answers: list[str] = field(default_factory=list)
    restore_ms: list[float] = field(default_factory=list)
    saved_bytes: int = 0
    saved_entries: int = 0


async def turn(session: aiohttp.ClientSession, base: str, conv: Conversation) -> tuple[float, str]:
    """The turn's TTFT (its whole time if nothing streamed) and its answer."""
    sample = await stream_chat(session, base, conv.model, "", ANSWER_TOKENS, messages=conv.messages)
    if sample.error:
        raise RuntimeError(sample.error)
    return (sample.ttft_s if sample.ttft_s is not None else sample.latency_s), sample.text


async def restore_stats(session: aiohttp.ClientSession, base: str, model: str) -> dict:
    async with session.get(base + "/api/ps") as r:
        for entry in (await r.json())["models"]:
            if entry["name"].split(":")[0] == model:
                return entry["localserve"].get("prompt_cache") or {}
    return {}


async def conversations(base: str, models: list[str]) -> Run:
    run = Run()
    convs = [
        Conversation(m, [{"role": "user", "content": document(m, c) + "\n" + QUESTIONS[0]}])
        for c in range(CONVERSATIONS)
        for m in models
    ]
    async with client_session() as session:
        for t in range(TURNS):
            for conv in convs:  # the models alternate: every request swaps
                ttft, answer = await turn(session, base, conv)
                run.answers.append(answer)
                if t > 0:
                    run.ttft_s.append(ttft)
                    stats = await restore_stats(session, base, conv.model)
                    if stats.get("disk_hits"):
                        run.restore_ms.append(stats["restore_ms"] / stats["hits"])
                conv.messages.append({"role": "assistant", "content": answer})
                conv.messages.append({"role": "user", "content": QUESTIONS[(t + 1) % TURNS]})
    return run


def serve(models: list[str], port: int, swap: bool, saved: bool) -> list[str]:
    args = ["--parallel", str(SLOTS), "--ctx", str(CTX)]
    for m in models:
        args += ["--model", m]
    if swap:
        args += ["--max-loaded-models", "1"]
    if not saved:
        args += ["--saved-conversations", "0"]
    return serve_command(args, port)


def measure(models: list[str], logdir: Path, name: str, swap: bool, saved: bool) -> Run:
    state = Path(tempfile.mkdtemp(prefix="state_", dir=logdir))
    port = free_port()
    env = {**os.environ, "XDG_STATE_HOME": str(state)}
    cmd = serve(models, port, swap, saved)
    with running(cmd, port, "/health", logdir / f"{name}.log", env=env) as base:
        run = asyncio.run(conversations(base, [Path(m).stem if "/" in m else m for m in models]))
    files = list(state.glob("localserve/conversations/*/*/*.kv"))
    run.saved_bytes = sum(f.stat().st_size for f in files)
    run.saved_entries = len(files)
    shutil.rmtree(state, ignore_errors=True)
    return run


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rounds", type=int, default=3, help="alternating rounds of on and off")
    p.add_argument("--no-write", action="store_true", help="do not update docs/benchmarks.md")
    args = p.parse_args(argv)
    from localserve.store.resolve import resolve

    with tempfile.TemporaryDirectory(prefix="bench_swap_back_") as tmp:
        logdir = Path(tmp)
        other = logdir / "smollm2-copy.gguf"
        shutil.copy(resolve("smollm2").path, other)
        models = ["smollm2", str(other)]
        on: list[Run] = []
        off: list[Run] = []
        for r in range(args.rounds):
            order = [(True, on), (False, off)] if r % 2 == 0 else [(False, off), (True, on)]
            for saved, runs in order:
                runs.append(measure(models, logdir, f"r{r}-{saved}", swap=True, saved=saved))
                what = "on" if saved else "off"
                print(f"round {r} {what}: {statistics.median(runs[-1].ttft_s):.2f}s", flush=True)
        kept = measure(models, logdir, "no-swap", swap=False, saved=True)
    ttft_on = statistics.median(statistics.median(r.ttft_s) for r in on)
    ttft_off = statistics.median(statistics.median(r.ttft_s) for r in off)
    restores = [ms for r in on for ms in r.restore_ms]
    same = all(r.answers == kept.answers for r in on)
    per_conv = statistics.median(r.saved_bytes / max(1, r.saved_entries) for r in on)
    table = [
        "| saved conversations | rounds | returning turn TTFT, median (s) | vs off |",
        "|---|---:|---:|---:|",
        f"| off | {len(off)} | {ttft_off:.2f} | 1.00x |",
        f"| on | {len(on)} | {ttft_on:.2f} | {div(ttft_on, ttft_off)} |",
    ]
    facts = [
        f"Command: `{shlex.join(command(__file__, argv))}`",
        f"{len(models)} models (SmolLM2 and a byte copy of it), `--max-loaded-models 1`, "
        f"{SLOTS} slots of {CTX} tokens; {CONVERSATIONS} conversations per model of about "
        f"2,000 tokens, {TURNS} turns, {ANSWER_TOKENS}-token greedy answers; every request "
        "swaps models. TTFT includes the model's load.",
        f"Bytes kept per conversation: {per_conv / 2**20:.1f} MiB; restore (read and "
        f"`llama_state_seq_set_data`), median: "
        f"{statistics.median(restores) if restores else float('nan'):.1f} ms",
        f"Greedy answers after a restore equal those without a swap: {'yes' if same else 'NO'}",
    ]
    title = "## Conversations across a swap (`bench_swap_back.py`)"
    publish(MARKERS, title, facts, table, not args.no_write)
    return 0 if same else 1


if __name__ == "__main__":
    cli(main)
