"""Multi-turn benchmark: conversations that come back, more of them than there are slots.

Each server gets 4 slots. 8 conversations, each with a system prompt of its own (~600 tokens),
talk at once, 4 turns each: every turn sends the whole conversation so far, greedy, and waits for
the answer before the next. With 8 conversations on 4 slots a conversation's cells are rarely
still in its slot when it returns: the later turns' time to first token shows what a server
keeps of them elsewhere (localserve: its host-memory prompt cache; llama.cpp's llama-server:
`--cache-ram`, given the same room here). The servers take turns, one round each, in
alternating order. Target (#27): later turns' TTFT p50 <= 0.8x llama-server's.

    python -m benchmarks.bench_multi_turn --llama-server BIN      # writes docs/benchmarks.md
    python -m benchmarks.bench_multi_turn --rounds 1 --no-write
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shlex
import statistics
import tempfile
from pathlib import Path

import aiohttp

from benchmarks._common import (
    cli,
    client_session,
    command,
    free_port,
    llama_server_command,
    publish,
    running,
    serve_command,
    stream_chat,
)

MARKERS = ("<!-- bench_multi_turn:start -->", "<!-- bench_multi_turn:end -->")
SLOTS, CTX = 4, 4096
CONVERSATIONS, TURNS = 8, 4
ANSWER_TOKENS = 48
# Room for the conversations' cells in each server's host-memory cache, in MiB.
CACHE_MIB = 1024
QUESTIONS = [
    "Which of the rules above matters most, and why?",
    "Give an example of the second rule.",
    "Now one for the fifth rule.",
    "Summarize our talk in one sentence.",
]


def system_prompt(c: int) -> str:
    """About 600 tokens of house rules, different for every conversation from the first word."""
    rules = [
        f"Rule {k} of team {c}: every change to module {c * 31 + k} is reviewed by two people, "
        f"tested on {k + 2} machines and described in the log before it ships."
        for k in range(16)
    ]
    return f"You are the assistant of team {c}.\n" + "\n".join(rules)


def server_command(name: str, model_path: str, port: int, threads: int, bin_: str) -> list[str]:
    if name == "localserve":
        args = ["--model", "smollm2", "--parallel", str(SLOTS), "--ctx", str(CTX)]
        args += ["--threads", str(threads), "--prompt-cache", f"{CACHE_MIB}MiB"]
        return serve_command(args, port)
    cache = ("--cache-ram", str(CACHE_MIB))
    return llama_server_command(bin_, model_path, port, SLOTS, CTX, threads, *cache)


async def conversation(session: aiohttp.ClientSession, base: str, c: int, tag: str) -> list[float]:
    """One conversation's turns; returns each turn's TTFT."""
    messages = [{"role": "system", "content": f"{tag}\n{system_prompt(c)}"}]
    ttfts = []
    for question in QUESTIONS[:TURNS]:
        messages.append({"role": "user", "content": question})
        sample = await stream_chat(
            session, base, "smollm2", "", ANSWER_TOKENS, messages=list(messages)
        )
        if sample.error or sample.ttft_s is None:
            raise RuntimeError(f"conversation {c}: {sample.error or 'no answer'}")
        ttfts.append(sample.ttft_s)
        messages.append({"role": "assistant", "content": sample.text})
    return ttfts


async def one_round(base: str, i: int) -> list[list[float]]:
    async with client_session() as session:
        await stream_chat(session, base, "smollm2", "Hello", 4)  # warm-up
        # A tag of its own each round: no server reuses an earlier round's conversations.
        tag = f"Session {i}."
        runs = (conversation(session, base, c, tag) for c in range(CONVERSATIONS))
        return list(await asyncio.gather(*runs))


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--threads", type=int, default=len(os.sched_getaffinity(0)))
    p.add_argument("--llama-server", default=os.environ.get("LLAMA_SERVER", ""), metavar="BIN")
    p.add_argument("--no-write", action="store_true", help="do not update docs/benchmarks.md")
    args = p.parse_args(argv)
    from localserve.store.resolve import resolve

    model_path = resolve("smollm2").path
    servers = ["localserve"] + (["llama-server"] if args.llama_server else [])
    first: dict[str, list[float]] = {name: [] for name in servers}
    later: dict[str, list[float]] = {name: [] for name in servers}
    with tempfile.TemporaryDirectory(prefix="bench_multi_turn_") as logdir:
        for i in range(args.rounds):
            for name in servers if i % 2 == 0 else servers[::-1]:
                port = free_port()
                cmd = server_command(name, model_path, port, args.threads, args.llama_server)
                with running(cmd, port, "/health", Path(logdir) / f"{name}-{i}.log") as base:
                    turns = asyncio.run(one_round(base, i))
                first[name] += [t[0] for t in turns]
                later[name] += [x for t in turns for x in t[1:]]
                print(
                    f"round {i} {name}: later turns' TTFT p50 "
                    f"{statistics.median(x for t in turns for x in t[1:]):.2f} s",
                    flush=True,
                )
    rows = [
        f"| {name} | {statistics.median(first[name]):.2f} | {statistics.median(later[name]):.2f} |"
        for name in servers
    ]
    lines = [
        f"{SLOTS} slots of {CTX} tokens, {args.threads} threads; {CONVERSATIONS} conversations "
        f"at once with ~600-token system prompts of their own, {TURNS} turns each, "
        f"{ANSWER_TOKENS}-token greedy answers; {CACHE_MIB} MiB of host-memory cache each "
        f"(`--prompt-cache`, `--cache-ram`); {args.rounds} rounds, servers alternating.",
        "",
        "| server | first turn TTFT p50 (s) | later turns' TTFT p50 (s) |",
        "|---|---:|---:|",
        *rows,
    ]
    if "llama-server" in servers:
        ratio = statistics.median(later["localserve"]) / statistics.median(later["llama-server"])
        lines += ["", f"- later turns, localserve / llama-server: {ratio:.2f}x (target <= 0.8x)"]
    title = "## Returning conversations, more than slots (`bench_multi_turn.py`)"
    facts = [f"Command: `{shlex.join(command(__file__, argv))}`"]
    publish(MARKERS, title, facts, lines, not args.no_write)
    return 0


if __name__ == "__main__":
    cli(main)
