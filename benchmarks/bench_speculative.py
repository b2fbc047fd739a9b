"""Speculative decoding benchmark: tokens/s with prompt-lookup drafts on and off, on edit-style
and quoting answers, at 1 and 16 streams.

Workloads, greedy (or sampled at `--temperature`, unseeded, in a section of their own):
- edit: a 60-line Python function, to be returned with the variable `x` renamed to `count`;
- rag: a passage of facts and a question whose answer quotes the passage's sentences.

One daemon (SmolLM2, 16 slots, `--speculative` set to `--draft-tokens`) serves every run; "off"
sends `speculative: 0` and "on" the server's setting, in alternating order each round, after a
warm-up that prefills every prompt once (else the first round pays the prefills). Reported per
workload and concurrency: the median tokens/s of each, their ratio (targets: >= 1.6x at c=1,
>= 0.98x at c=16), the share of drafted tokens the model kept (from /metrics), and whether every
answer was identical (sampled answers are not compared: they differ run to run).

    python -m benchmarks.bench_speculative                   # writes docs/benchmarks.md
    python -m benchmarks.bench_speculative --rounds 1 --no-write
    python -m benchmarks.bench_speculative --draft-model smollm2   # a draft model's section

With `--draft-model`, the daemon's drafts come from that model instead of prompt lookup. Only
SmolLM2 shares SmolLM2's vocabulary here, so it drafts for itself: a measure of what drafting
costs and how often it holds, not of a real pair's speed-up.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import shlex
import statistics
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import aiohttp

from benchmarks._common import (
    cli,
    client_session,
    command,
    div,
    free_port,
    llama_server_command,
    publish,
    running,
    serve_command,
)

MARKERS = ("<!-- bench_speculative:start -->", "<!-- bench_speculative:end -->")
SAMPLED_MARKERS = (
    "<!-- bench_speculative_sampled:start -->",
    "<!-- bench_speculative_sampled:end -->",
)
DRAFT_MARKERS = (
    "<!-- bench_speculative_draft_model:start -->",
    "<!-- bench_speculative_draft_model:end -->",
)
SLOTS, CTX = 16, 2048
MAX_TOKENS = 320
# Draft tokens: (drafted, accepted).
Counts = tuple[float, float]


def edit_prompt(i: int) -> str:
    body = []
    for j in range(28):
        body.append(f"    if x > {j * 3 + i}:")
        body.append(f"        x = x - {j + 1}")
    lines = [f"def settle_{i}(x):", *body, "    return x"]
    return (
        "Here is a Python function:\n\n" + "\n".join(lines) + "\n\nReturn it with the variable "
        "`x` renamed to `count`. Write only the code."
    )


def rag_prompt(i: int) -> str:
    facts = [
        f"The station at kilometre {k * 12 + i} of the northern line opened in {1890 + k} "
        f"and serves {k * 300 + 150} passengers a day."
        for k in range(20)
    ]
    return (
        "Context:\n" + "\n".join(facts) + "\n\nQuestion: list every station of the northern "
        "line with its opening year and its passengers, quoting the context's sentences."
    )


WORKLOADS = {"edit": edit_prompt, "rag": rag_prompt}


@dataclass
class Server:
    """Where a server answers with drafts and without: one localserve daemon for both (a
    request's `speculative: 0` turns them off), two llama-servers (with and without
    `--spec-type ngram-simple`)."""

    name: str
    on: str
    off: str


async def one(
    session: aiohttp.ClientSession, base: str, prompt: str, speculative: bool, temperature: float
) -> tuple[int, str, Counts]:
    body: dict = {
        "model": "smollm2",
        "messages": [{"role": "user", "content": prompt}],
        "max_tokens": MAX_TOKENS,
        "temperature": temperature,
    }
    if not speculative:
        body["speculative"] = 0
    async with session.post(base + "/v1/chat/completions", json=body) as r:
        if r.status != 200:
            raise RuntimeError(f"HTTP {r.status}: {(await r.text())[:300]}")
        answer = await r.json()
    # llama-server reports each answer's drafts in its timings.
    timings = answer.get("timings") or {}
    counts = (float(timings.get("draft_n", 0)), float(timings.get("draft_n_accepted", 0)))
    return (
        answer["usage"]["completion_tokens"],
        answer["choices"][0]["message"]["content"],
        counts,
    )


async def batch(
    base: str, prompts: list[str], speculative: bool, temperature: float = 0.0
) -> tuple[float, list[str], Counts]:
    async with client_session() as session:
        t0 = time.perf_counter()
        results = await asyncio.gather(
            *(one(session, base, p, speculative, temperature) for p in prompts)
        )
        wall = time.perf_counter() - t0
    counts = (sum(c[0] for _, _, c in results), sum(c[1] for _, _, c in results))
    return sum(n for n, _, _ in results) / wall, [text for _, text, _ in results], counts


def drafts(server: Server) -> Counts:
    """localserve's draft counters (drafted, accepted); llama-server's come with its answers."""
    if server.name != "localserve":
        return 0.0, 0.0
    text = urllib.request.urlopen(server.on + "/metrics").read().decode()
    values = {"drafted": 0.0, "accepted": 0.0}
    for line in text.splitlines():
        if line.startswith("localserve_draft_tokens_total"):
            values["drafted"] = float(line.split()[-1])
        elif line.startswith("localserve_draft_tokens_accepted_total"):
            values["accepted"] = float(line.split()[-1])
    return values["drafted"], values["accepted"]


def measure(server: Server, workload: str, streams: int, rounds: int, temperature: float) -> str:
    prompts = [WORKLOADS[workload](i) for i in range(streams)]
    for base in {server.on, server.off}:  # warm-up: every prompt's prefix cached
        asyncio.run(batch(base, prompts, False))
    rates: dict[bool, list[float]] = {True: [], False: []}
    answers: dict[bool, list[list[str]]] = {True: [], False: []}
    drafted = accepted = 0.0
    for r in range(rounds):
        for on in (True, False) if r % 2 == 0 else (False, True):
            before = drafts(server)
            base = server.on if on else server.off
            rate, texts, counts = asyncio.run(batch(base, prompts, on, temperature))
            after = drafts(server)
            if on:
                drafted += after[0] - before[0] + counts[0]
                accepted += after[1] - before[1] + counts[1]
            rates[on].append(rate)
            answers[on].append(texts)
            state = "on" if on else "off"
            print(f"{server.name} {workload} c={streams} round {r} {state}: {rate:.1f} tok/s")
    same = all(a == answers[False][0] for a in answers[True] + answers[False])
    identical = "sampled" if temperature > 0 else "yes" if same else "NO"
    with_drafts, without = statistics.median(rates[True]), statistics.median(rates[False])
    kept = f"{accepted / drafted:.0%} of {drafted:.0f}" if drafted else "none drafted"
    return (
        f"| {server.name} | {workload} | {streams} | {without:.1f} | {with_drafts:.1f} "
        f"| {div(with_drafts, without)} "
        f"| {kept} | {identical} |"
    )


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rounds", type=int, default=3, help="alternating rounds of on and off")
    p.add_argument("--concurrency", default="1,16", help="streams, comma-separated")
    p.add_argument("--draft-tokens", type=int, default=8, help="the daemon's --speculative")
    p.add_argument(
        "--llama-server",
        default=os.environ.get("LLAMA_SERVER", ""),
        metavar="BIN",
        help="llama.cpp's llama-server (env LLAMA_SERVER): also run it with and without "
        "--spec-type ngram-simple",
    )
    p.add_argument(
        "--temperature", type=float, default=0.0, help="0: greedy; above: sampled, no seed"
    )
    p.add_argument(
        "--draft-model",
        default="",
        metavar="MODEL",
        help="draft with this model (--draft-model smollm2=MODEL; llama-server's "
        "--spec-type draft-simple) instead of prompt lookup, in a section of its own",
    )
    p.add_argument("--no-write", action="store_true", help="do not update docs/benchmarks.md")
    args = p.parse_args(argv)
    threads = len(os.sched_getaffinity(0))
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench_speculative_") as tmp:
        for server in servers(args, threads, Path(tmp)):
            with server as target:
                for workload in WORKLOADS:
                    for streams in (int(c) for c in args.concurrency.split(",")):
                        row = measure(target, workload, streams, args.rounds, args.temperature)
                        rows.append(row)
    table = [
        "| server | workload | streams | off, tok/s (median) | on, tok/s (median) | on vs off "
        "| drafts kept | answers identical |",
        "|---|---|---:|---:|---:|---:|---|---|",
        *rows,
    ]
    sampled = args.temperature > 0
    answers = f"sampled (temperature {args.temperature}, no seed)" if sampled else "greedy"
    drafter = f"the draft model {args.draft_model}" if args.draft_model else "prompt lookup"
    spec = (
        f"--spec-type draft-simple --spec-draft-model <{args.draft_model}'s file>"
        if args.draft_model
        else "--spec-type ngram-simple"
    )
    facts = [
        f"Command: `{shlex.join(command(__file__, argv))}`",
        f"SmolLM2-135M (Q4_1), {SLOTS} slots of {CTX} tokens, {threads} threads; {answers} "
        f"answers of up to {MAX_TOKENS} tokens, drafts of up to {args.draft_tokens} by "
        f"{drafter}; "
        f"{args.rounds} alternating rounds, medians.",
        "llama-server: "
        + (
            f"`{args.llama_server}`, on with `{spec} --spec-draft-n-max "
            f"{args.draft_tokens}`, off without, both with the same slots and threads."
            if args.llama_server
            else "not run (no --llama-server)."
        ),
    ]
    title = "## Speculative decoding by prompt lookup (`bench_speculative.py`)"
    markers = MARKERS
    if args.draft_model:
        title, markers = title.replace("by prompt lookup", "with a draft model"), DRAFT_MARKERS
    elif sampled:
        title = title.replace("lookup", "lookup, sampled answers")
        markers = SAMPLED_MARKERS
    publish(markers, title, facts, table, not args.no_write)
    return 0


@contextlib.contextmanager
def localserve(draft_tokens: int, draft_model: str, logs: Path) -> Iterator[Server]:
    port = free_port()
    args = ["--model", "smollm2", "--parallel", str(SLOTS), "--ctx", str(CTX)]
    if draft_model:
        args += ["--draft-model", f"smollm2={draft_model}"]
    cmd = serve_command([*args, "--speculative", str(draft_tokens)], port)
    with running(cmd, port, "/health", logs / "localserve.log") as base:
        yield Server("localserve", base, base)


@contextlib.contextmanager
def llama_servers(
    binary: str, threads: int, draft_tokens: int, draft_model: str, logs: Path
) -> Iterator[Server]:
    from localserve.store.resolve import resolve

    model = resolve("smollm2").path
    spec = ["--spec-type", "ngram-simple", "--spec-draft-n-max", str(draft_tokens)]
    if draft_model:
        draft = resolve(draft_model).path
        spec = ["--spec-type", "draft-simple", "--spec-draft-model", draft, *spec[2:]]
    bases = []
    with contextlib.ExitStack() as stack:
        for name, extra in (("on", spec), ("off", [])):
            port = free_port()
            cmd = llama_server_command(binary, model, port, SLOTS, CTX, threads, *extra)
            log = logs / f"llama-server-{name}.log"
            bases.append(stack.enter_context(running(cmd, port, "/health", log)))
        yield Server("llama-server", bases[0], bases[1])


def servers(
    args: argparse.Namespace, threads: int, logs: Path
) -> list[contextlib.AbstractContextManager[Server]]:
    draft = args.draft_model
    found: list[contextlib.AbstractContextManager[Server]] = [
        localserve(args.draft_tokens, draft, logs)
    ]
    if args.llama_server:
        found.append(llama_servers(args.llama_server, threads, args.draft_tokens, draft, logs))
    return found


if __name__ == "__main__":
    cli(main)
