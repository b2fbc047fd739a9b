"""ONNX benchmark: continuous batching against one-at-a-time serving and a static batch's ceiling.

One run, on the test suite's ONNX SmolLM2 (built and cached by tests/support/onnx_model.py if
missing), greedy, `--max-tokens` new tokens per request (128 by default):

- single-stream: one streamed request to the daemon;
- one at a time: the same 8 prompts sent one after another;
- dynamic 4 and 8: that many concurrent streamed requests to the daemon, sent together;
- staggered 8: 8 closed-loop streams (each sends its next request when its last one ends),
  started an eighth of a single request's duration apart and 3 requests each: requests keep
  arriving while others run, which is where a static batch makes a request wait;
- static ceiling: the same 8 prompts as one og.Generator batch in this process, the daemon
  stopped (the fastest onnxruntime-genai goes: no HTTP, no queue, no post-processing).

Each daemon mode reports its TTFT p50 (send to first content chunk, over its requests).

The prompts all have the same number of tokens: in onnxruntime-genai 0.18 a Generator batch of
prompts of different lengths decodes garbage (append_tokens builds no padding mask), so only
equal lengths give the ceiling a fair answer. Targets (issue #27): staggered 8's TTFT p50
<= 1.0 s and its throughput >= 1.6x single-stream; (issue #7) dynamic 8 >= 1.6x one at a time,
and >= 0.8x the static ceiling.

    python -m benchmarks.bench_onnx                               # full run, writes the doc
    python -m benchmarks.bench_onnx --max-tokens 8 --no-write     # smoke run
"""

from __future__ import annotations

import argparse
import asyncio
import platform
import shlex
import tempfile
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from benchmarks._common import (
    Sample,
    cli,
    client_session,
    dated,
    div,
    free_port,
    machine,
    percentile,
    running,
    serve_command,
    stream_chat,
    write_doc,
)
from tests.support.onnx_model import MODEL_NAME, ensure_model

START, END = "<!-- bench_onnx:start -->", "<!-- bench_onnx:end -->"
SUBJECTS = [
    "lighthouse",
    "dragon",
    "robot",
    "garden",
    "river",
    "castle",
    "pirate",
    "wizard",
    "forest",
    "rocket",
    "violin",
    "tiger",
    "mountain",
    "island",
    "train",
    "library",
    "bakery",
    "desert",
    "volcano",
    "harbor",
    "village",
    "comet",
    "glacier",
    "market",
    "painter",
    "sailor",
]
BATCH = 8
ROUNDS = 3  # requests per stream in the staggered mode


@dataclass
class Mode:
    """One mode's figures: its wall time, completion tokens and time to first token p50."""

    seconds: float
    tokens: int
    ttft_p50_s: float | None = None

    @property
    def tok_s(self) -> float:
        return self.tokens / self.seconds if self.seconds > 0 else 0.0


def measured(seconds: float, samples: list[Sample]) -> Mode:
    ttfts = [s.ttft_s for s in samples if s.ttft_s is not None]
    p50 = percentile(ttfts, 0.5) if ttfts else None
    return Mode(seconds, sum(s.tokens for s in samples), p50)


def equal_length_prompts(folder: Path, n: int) -> tuple[list[str], list[list[int]]]:
    """n prompts whose chat-templated token counts are equal, as the daemon would encode them."""
    import onnxruntime_genai as og

    from localserve.formats.chat_template import ChatTemplate
    from localserve.formats.onnx import read_folder

    meta = read_folder(folder)
    template = ChatTemplate(
        meta.chat_template(),
        meta.special_text("bos_token"),
        meta.special_text("eos_token"),
        meta.architecture,
    )
    tokenizer = og.Tokenizer(og.Model(str(folder)))
    encoded = {}
    for subject in SUBJECTS:
        prompt = f"Write a long story about a {subject} and everything that happens to it."
        text = template.render([{"role": "user", "content": prompt}], add_generation_prompt=True)
        encoded[prompt] = [int(t) for t in tokenizer.encode(text)]
    length, count = Counter(len(t) for t in encoded.values()).most_common(1)[0]
    if count < n:
        raise SystemExit(f"only {count} prompts share a token length; add subjects")
    chosen = [p for p, t in encoded.items() if len(t) == length][:n]
    return chosen, [encoded[p] for p in chosen]


def static_ceiling(folder: Path, prompts: list[list[int]], max_tokens: int) -> tuple[float, int]:
    """(seconds, useful tokens) for one og.Generator batch; a row's tokens stop at its EOS."""
    import numpy as np
    import onnxruntime_genai as og

    model = og.Model(str(folder))
    params = og.GeneratorParams(model)
    length = len(prompts[0])
    params.set_search_options(
        max_length=length + max_tokens, do_sample=False, batch_size=len(prompts)
    )
    eos = set(read_eos(folder))
    t0 = time.perf_counter()
    generator = og.Generator(model, params)
    generator.append_tokens(np.asarray(prompts, dtype=np.int32))
    ended = [False] * len(prompts)
    useful = 0
    while not generator.is_done():
        generator.generate_next_token()
        for row, token in enumerate(generator.get_next_tokens()):
            if not ended[row]:
                ended[row] = int(token) in eos
                useful += 0 if ended[row] else 1
    return time.perf_counter() - t0, useful


def read_eos(folder: Path) -> tuple[int, ...]:
    from localserve.formats.onnx import read_folder

    return read_folder(folder).eos_ids


async def daemon_runs(base: str, prompts: list[str], max_tokens: int) -> dict[str, Mode]:
    """Each daemon mode's figures, by mode."""
    out: dict[str, Mode] = {}
    async with client_session() as session:

        async def one(prompt: str) -> Sample:
            sample = await stream_chat(session, base, MODEL_NAME, prompt, max_tokens)
            if sample.error:
                raise RuntimeError(sample.error)
            return sample

        await one(prompts[0])  # warm-up
        single = await one(prompts[0])
        out["single-stream"] = measured(single.latency_s, [single])
        t0 = time.perf_counter()
        serial = [await one(p) for p in prompts]
        out[f"one at a time ({len(prompts)})"] = measured(time.perf_counter() - t0, serial)
        for c in (4, BATCH):
            t0 = time.perf_counter()
            samples = await asyncio.gather(*(one(p) for p in prompts[:c]))
            out[f"dynamic {c}"] = measured(time.perf_counter() - t0, list(samples))
            print(f"dynamic {c}: {out[f'dynamic {c}'].tok_s:.1f} tok/s", flush=True)

        async def stream(index: int, delay: float) -> list[Sample]:
            await asyncio.sleep(delay)
            return [await one(prompts[(index + r) % len(prompts)]) for r in range(ROUNDS)]

        # Arrivals an eighth of a request apart: each lands while earlier ones run.
        gap = single.latency_s / BATCH
        t0 = time.perf_counter()
        streams = await asyncio.gather(*(stream(i, i * gap) for i in range(BATCH)))
        mode = measured(time.perf_counter() - t0, [s for samples in streams for s in samples])
        out[f"staggered {BATCH}"] = mode
        print(f"staggered {BATCH}: {mode.tok_s:.1f} tok/s, TTFT p50 {mode.ttft_p50_s}", flush=True)
    return out


def section(rows: dict[str, Mode], argv: list[str], smoke: bool) -> str:
    one_at_a_time = next(m.tok_s for k, m in rows.items() if k.startswith("one at a time"))
    single = rows["single-stream"]
    ceiling = rows[f"static ceiling ({BATCH})"].tok_s
    dyn8 = rows[f"dynamic {BATCH}"].tok_s
    staggered = rows[f"staggered {BATCH}"]
    from importlib.metadata import version

    def ttft(mode: Mode) -> str:
        return "—" if mode.ttft_p50_s is None else f"{mode.ttft_p50_s:.2f}"

    lines = [
        START,
        "## ONNX continuous batching (`bench_onnx.py`)"
        + (" — SMOKE RUN, not a figure" if smoke else ""),
        "",
        *dated(),
        f"- Machine: {machine()}",
        f"- Versions: localserve {version('localserve')}, onnxruntime-genai "
        f"{version('onnxruntime-genai')}, Python {platform.python_version()}",
        f"- Model: `{MODEL_NAME}` (SmolLM2-135M-Instruct, int4 k_quant, CPU)",
        f"- Command: `{shlex.join(argv)}`",
        "",
        "Greedy, streamed chat completions of equal-length prompts. tok/s is completion tokens "
        "over wall time; TTFT p50 is the median time from send to the first content chunk. "
        f"Staggered {BATCH} is {BATCH} closed-loop streams of {ROUNDS} requests each, started "
        f"an eighth of a single request apart; the static ceiling is one og.Generator batch "
        "in-process.",
        "",
        "| mode | seconds | tokens | tok/s | TTFT p50 (s) |",
        "|---|---:|---:|---:|---:|",
        *(
            f"| {k} | {m.seconds:.2f} | {m.tokens} | {m.tok_s:.1f} | {ttft(m)} |"
            for k, m in rows.items()
        ),
        "",
        f"- staggered {BATCH} TTFT p50: {ttft(staggered)} s (target <= 1.0 s)",
        f"- staggered {BATCH} / single-stream: {div(staggered.tok_s, single.tok_s)} "
        "(target >= 1.6x)",
        f"- dynamic {BATCH} / one at a time: {div(dyn8, one_at_a_time)} (target >= 1.6x)",
        f"- dynamic {BATCH} / static ceiling: {div(dyn8, ceiling)} (target >= 0.8x)",
        END,
    ]
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--max-tokens", type=int, default=128)
    p.add_argument("--model-dir", type=Path, default=None, help="an ONNX folder (default: build)")
    p.add_argument("--no-write", action="store_true", help="do not update docs/benchmarks.md")
    args = p.parse_args(argv)
    folder = args.model_dir or ensure_model()
    prompts, tokens = equal_length_prompts(folder, BATCH)
    port = free_port()
    cmd = serve_command(["--model", str(folder), "--parallel", str(BATCH), "--ctx", "1024"], port)
    log = Path(tempfile.gettempdir()) / f"bench-onnx-{port}.log"
    with running(cmd, port, "/health", log) as base:
        rows = asyncio.run(daemon_runs(base, prompts, args.max_tokens))
    seconds, useful = static_ceiling(folder, tokens, args.max_tokens)
    rows[f"static ceiling ({BATCH})"] = Mode(seconds, useful)
    text = section(rows, ["python", "-m", "benchmarks.bench_onnx", *argv], args.max_tokens < 128)
    print(text)
    if not args.no_write:
        write_doc(text, START, END)
    return 0


if __name__ == "__main__":
    cli(main)
