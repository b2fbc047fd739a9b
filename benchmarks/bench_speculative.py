"""Speculative decoding benchmark (issue #58): localserve at its defaults against llama-server's
best speculation, on edits, at 1 and 16 streams.

Workloads, greedy, up to `--max-tokens` each (see _speculative_workloads.py):
- edit: a 60-line Python function, to be returned with the variable `x` renamed to `count`
  (OpenAI's /v1/chat/completions);
- agent-edit: a coding agent's turn, a 50-line module to be returned whole with one
  function's parameter renamed (Anthropic's /v1/messages, as Claude Code sends it);
- rag (not run unless named): a passage of facts, and a question answered by quoting it.

For each model (`--models`), the servers, in this order, each started afresh every round:
- llama-server three times, one process at a time: plain (no drafts), `--spec-type ngram-mod`
  at its defaults (its best setting), `--spec-type ngram-simple --spec-draft-n-max 64`;
- one localserve daemon at its defaults for speculation: "on" is a plain request, "off" the
  same with `speculative: 0` in its body (both faces read the field).

Each start begins with a 1-token answer to every prompt, so that the timed requests find their
prefixes cached, then times every workload at every concurrency. Starting afresh each round
keeps a round from drafting from an earlier round's answers: llama-server's ngram-mod keeps the
n-grams of every request it has seen. Reported per model, workload, streams and server: the
median tokens/s over `--rounds`, its ratio to the same server without drafts, the share of
drafted tokens kept (from each server's /metrics), and whether every answer equalled the same
server's answer without drafts; above them, the issue's two figures: localserve's defaults vs
llama-server ngram-mod at 1 stream, and localserve on vs off at 16 (targets >= 1.0x).

    python -m benchmarks.bench_speculative --llama-server BIN   # writes docs/benchmarks.md
    python -m benchmarks.bench_speculative --models smollm2 --rounds 1 --no-write
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import math
import os
import shlex
import statistics
import tempfile
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks._common import (
    cli,
    command,
    div,
    free_port,
    llama_server_command,
    publish,
    running,
    serve_command,
)
from benchmarks._speculative_workloads import WORKLOADS, llama_version, metric_totals, run_batch
from localserve.ground import settings
from localserve.ground.config_file import CONFIG_ENV
from localserve.store.resolve import resolve
from tests.support.residency_support import gemma_file

MARKERS = ("<!-- bench_speculative:start -->", "<!-- bench_speculative:end -->")
# Both prompts are about 500 tokens (SmolLM2 and Gemma alike): with a 400-token answer, well
# inside 2048.
SLOTS, CTX = 16, 2048
# Each server's /metrics counters of drafted and of kept draft tokens.
LLAMA_COUNTERS = (
    "llamacpp:spec_decode_num_draft_tokens_total",
    "llamacpp:spec_decode_num_accepted_tokens_total",
)
LOCAL_COUNTERS = ("localserve_draft_tokens_total", "localserve_draft_tokens_accepted_total")


@dataclass
class Variant:
    """A server as the tables name it: the request fields or llama-server flags that make it,
    and the variant of the same server without drafts, which it is compared with."""

    label: str
    reference: str
    flags: tuple[str, ...] = ()
    fields: dict[str, Any] = field(default_factory=dict)


PLAIN, NGRAM_MOD, NGRAM_SIMPLE = (
    "llama-server plain",
    "llama-server ngram-mod",
    "llama-server ngram-simple",
)
ON, OFF = "localserve on", "localserve off"
LLAMA_VARIANTS = [
    Variant(PLAIN, PLAIN),
    # No n_match / n_min / n_max: its defaults (24, 48, 64) are its best on these edits.
    Variant(NGRAM_MOD, PLAIN, ("--spec-type", "ngram-mod")),
    Variant(NGRAM_SIMPLE, PLAIN, ("--spec-type", "ngram-simple", "--spec-draft-n-max", "64")),
]
LOCAL_VARIANTS = [Variant(ON, OFF), Variant(OFF, OFF, fields={"speculative": 0})]


@dataclass(frozen=True)
class Target:
    """What each server of a model is started with."""

    model: str  # as --models names it
    gguf: str
    served: str  # the name localserve serves the file under, which requests give
    threads: int
    logs: Path
    llama_server: str  # the binary, or "" to run localserve alone


@dataclass
class Process:
    """A server process, started afresh each round, and the variants it answers as."""

    start: Callable[[Target], contextlib.AbstractContextManager[str]]
    variants: list[Variant]
    counters: tuple[str, str]


@dataclass
class Runs:
    """One variant's timed batches at one model, workload and concurrency."""

    rates: list[float] = field(default_factory=list)
    answers: list[list[str]] = field(default_factory=list)
    drafted: float = 0.0
    accepted: float = 0.0

    @property
    def median(self) -> float:
        return statistics.median(self.rates) if self.rates else math.nan

    def kept(self) -> str:
        return (
            f"{self.accepted / self.drafted:.0%} of {self.drafted:.0f}"
            if self.drafted
            else "none drafted"
        )

    def same_as(self, reference: Runs) -> str:
        """Every answer against the reference's first round's answer to the same prompt."""
        if not reference.answers:
            return "n/a"
        first = reference.answers[0]
        pairs = [(a, b) for texts in self.answers for a, b in zip(texts, first)]
        differ = sum(a != b for a, b in pairs)
        return "yes" if not differ else f"NO ({differ} of {len(pairs)} differ)"


Cell = tuple[str, int, str]  # workload, streams, variant's label


def model_file(name: str) -> str:
    return gemma_file() if name == "gemma3" else resolve(name).path


# Gemma 3 270M's file carries no chat template: llama-server would fall back to ChatML, and so
# answer a prompt of other tokens than localserve's (its Gemma turns).
# `--no-jinja`: with Jinja on, `gemma` would be taken as a template's text.
MODEL_FLAGS = {"gemma3": ("--no-jinja", "--chat-template", "gemma")}


@contextlib.contextmanager
def llama_server(variant: Variant, target: Target) -> Iterator[str]:
    port = free_port()
    extra = ("--metrics", *MODEL_FLAGS.get(target.model, ()))
    cmd = llama_server_command(
        target.llama_server, target.gguf, port, SLOTS, CTX, target.threads, *extra
    )
    log = target.logs / f"{variant.label.replace(' ', '-')}.log"
    with running([*cmd, *variant.flags], port, "/health", log) as base:
        yield base


@contextlib.contextmanager
def localserve(target: Target) -> Iterator[str]:
    port = free_port()
    args = ["--model", target.gguf, "--parallel", str(SLOTS), "--ctx", str(CTX)]
    # Speculation at the daemon's defaults: no flag, and neither our environment nor a config
    # file of this machine's user may set it instead.
    drop = {settings.ENV["speculative"], settings.ENV["draft_model"]}
    env = {k: v for k, v in os.environ.items() if k not in drop}
    env[CONFIG_ENV] = str(target.logs / "no-config.toml")
    log = target.logs / "localserve.log"
    with running(serve_command(args, port), port, "/health", log, env) as base:
        # A model served by path is named after its file: check that name on the daemon's list.
        with urllib.request.urlopen(base + "/v1/models") as r:
            listed = [m["id"] for m in json.load(r)["data"]]
        if target.served not in listed:
            raise RuntimeError(f"localserve lists {listed}, not {target.served!r}")
        yield base


def processes(target: Target) -> list[Process]:
    """llama-server's variants (each its own process) first, then localserve's daemon."""
    llama = LLAMA_VARIANTS if target.llama_server else []
    return [
        *(Process(functools.partial(llama_server, v), [v], LLAMA_COUNTERS) for v in llama),
        Process(localserve, LOCAL_VARIANTS, LOCAL_COUNTERS),
    ]


def measure(args: argparse.Namespace, target: Target) -> dict[Cell, Runs]:
    """Every round of every server of the target's model."""
    runs: dict[Cell, Runs] = {}
    for r in range(args.rounds):
        for process in processes(target):
            with process.start(target) as base:
                for workload in args.workloads.split(","):
                    time_workload(args, target, base, process, workload, r, runs)
    return runs


def time_workload(
    args: argparse.Namespace,
    target: Target,
    base: str,
    process: Process,
    workload: str,
    r: int,
    runs: dict[Cell, Runs],
) -> None:
    """Round r of one server's variants on `workload`, at every concurrency."""
    concurrency = [int(c) for c in args.concurrency.split(",")]
    asked = {"model": target.served, "max_tokens": args.max_tokens, "temperature": 0}
    # Every prompt's prefix cached, at the cost of one token each.
    run_batch(base, WORKLOADS[workload], max(concurrency), {**asked, "max_tokens": 1})
    for streams in concurrency:
        # Alternate which of the daemon's variants goes first, round by round.
        for v in process.variants if r % 2 == 0 else process.variants[::-1]:
            before = metric_totals(base, process.counters)
            rate, texts = run_batch(base, WORKLOADS[workload], streams, {**asked, **v.fields})
            after = metric_totals(base, process.counters)
            got = runs.setdefault((workload, streams, v.label), Runs())
            got.rates.append(rate)
            got.answers.append(texts)
            got.drafted += after[0] - before[0]
            got.accepted += after[1] - before[1]
            print(
                f"{target.model} {workload} c={streams} round {r} {v.label}: {rate:.1f} tok/s",
                flush=True,
            )


def tok_s(value: float) -> str:
    return "n/a" if math.isnan(value) else f"{value:.1f}"


def tables(
    runs: dict[str, dict[Cell, Runs]], workloads: list[str], concurrency: list[int]
) -> list[str]:
    """The issue's two figures, then every variant's row."""

    def rate(m: str, w: str, s: int, v: str) -> str:
        got = runs[m].get((w, s, v))
        return tok_s(got.median if got else math.nan)

    def ratio(m: str, w: str, s: int, v: str, ref: str) -> str:
        got, base = runs[m].get((w, s, v)), runs[m].get((w, s, ref))
        return div(got.median, base.median) if got and base else "n/a"

    cells = [(m, w) for m in runs for w in workloads]
    out = []
    if 1 in concurrency:
        out += [
            "**1 stream**: localserve at its defaults against llama-server's best speculation "
            "(tok/s, medians).",
            "",
            "| model | workload | localserve defaults | llama-server ngram-mod "
            "| localserve / ngram-mod (target >= 1.0x) | llama-server plain "
            "| llama-server ngram-simple | localserve off |",
            "|---|---|---:|---:|---:|---:|---:|---:|",
            *(
                f"| {m} | {w} | {rate(m, w, 1, ON)} | {rate(m, w, 1, NGRAM_MOD)} "
                f"| {ratio(m, w, 1, ON, NGRAM_MOD)} | {rate(m, w, 1, PLAIN)} "
                f"| {rate(m, w, 1, NGRAM_SIMPLE)} | {rate(m, w, 1, OFF)} |"
                for m, w in cells
            ),
            "",
        ]
    for s in (s for s in concurrency if s > 1):
        out += [
            f"**{s} streams**: localserve with speculation on against off (tok/s, medians).",
            "",
            "| model | workload | localserve on | localserve off | on / off (target >= 1.0x) "
            "| llama-server ngram-mod | llama-server plain |",
            "|---|---|---:|---:|---:|---:|---:|",
            *(
                f"| {m} | {w} | {rate(m, w, s, ON)} | {rate(m, w, s, OFF)} "
                f"| {ratio(m, w, s, ON, OFF)} | {rate(m, w, s, NGRAM_MOD)} "
                f"| {rate(m, w, s, PLAIN)} |"
                for m, w in cells
            ),
            "",
        ]
    out += [
        "**Every server** (tok/s: medians; vs: against the same server without drafts).",
        "",
        "| model | workload | streams | server | tok/s | vs plain / off | drafts kept "
        "| answers as plain / off |",
        "|---|---|---:|---|---:|---:|---|---|",
    ]
    for m, w in cells:
        for s in concurrency:
            for v in LLAMA_VARIANTS + LOCAL_VARIANTS:
                got = runs[m].get((w, s, v.label))
                if got is None:
                    continue
                ref = runs[m].get((w, s, v.reference), Runs())
                vs = ratio(m, w, s, v.label, v.reference)
                out.append(
                    f"| {m} | {w} | {s} | {v.label} | {tok_s(got.median)} | {vs} "
                    f"| {got.kept()} | {got.same_as(ref)} |"
                )
    return out


def facts(args: argparse.Namespace, argv: list[str], threads: int) -> list[str]:
    files = {m: model_file(m) for m in args.models.split(",")}
    models = "; ".join(
        f"{m}: `{Path(f).name}`, served by localserve as `{resolve(f).name}`"
        for m, f in files.items()
    )
    spec = settings.shown("speculative", settings.Settings().speculative)
    found = [
        f"Command: `{shlex.join(command(__file__, argv))}`",
        f"Models: {models}.",
        f"Every server: {SLOTS} slots of {CTX} tokens, {threads} threads; greedy answers of up to "
        f"{args.max_tokens} tokens; rounds: {args.rounds}, each starting every server afresh "
        "(after a 1-token answer to every prompt, so its prefix is cached); medians of the "
        "streams' output tokens over the batch's wall time.",
        "localserve: `python -m localserve serve --model <file> --parallel "
        f"{SLOTS} --ctx {CTX}`, speculation at its defaults (`speculative` {spec} in this tree; "
        'no flag, environment variable or config file sets it); "off" adds `"speculative": 0` '
        "to each request, on both faces. Drafts counted by its /metrics.",
    ]
    if args.llama_server:
        base = llama_server_command(
            args.llama_server, "<file>", 0, SLOTS, CTX, threads, "--metrics"
        )
        base[base.index("--port") + 1] = "<port>"
        found.append(
            f"llama-server ({llama_version(args.llama_server)}): `{' '.join(base)}`, then "
            + ", ".join(
                f"{v.label.split()[-1]}: `{' '.join(v.flags)}`" if v.flags else "plain: no more"
                for v in LLAMA_VARIANTS
            )
            + "; ngram-mod at its defaults (n_match 24, n_min 48, n_max 64); for gemma3 "
            "`--no-jinja --chat-template gemma` (its file has none: ChatML otherwise, not the "
            "prompt localserve sends). Drafts counted by its /metrics."
        )
    else:
        found.append("llama-server: not run (no --llama-server).")
    found.append(
        "Answers: each compared with the same server's answer without drafts (llama-server "
        "plain, localserve off) to the same prompt in the first round; the plain and off rows "
        "compare their own later rounds with their first."
    )
    return found


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--models", default="gemma3,smollm2", help="comma-separated")
    p.add_argument("--workloads", default="edit,agent-edit", help=f"of {', '.join(WORKLOADS)}")
    p.add_argument("--rounds", type=int, default=3, help="rounds of every server")
    p.add_argument("--concurrency", default="1,16", help="streams, comma-separated")
    p.add_argument("--max-tokens", type=int, default=400, help="each answer's cap")
    p.add_argument(
        "--llama-server",
        default=os.environ.get("LLAMA_SERVER", ""),
        metavar="BIN",
        help="llama.cpp's llama-server (env LLAMA_SERVER): the anchor, run plain, with "
        "ngram-mod and with ngram-simple",
    )
    p.add_argument("--no-write", action="store_true", help="do not update docs/benchmarks.md")
    args = p.parse_args(argv)
    threads = len(os.sched_getaffinity(0))
    runs: dict[str, dict[Cell, Runs]] = {}
    with tempfile.TemporaryDirectory(prefix="bench_speculative_") as tmp:
        for model in args.models.split(","):
            gguf = model_file(model)
            target = Target(model, gguf, resolve(gguf).name, threads, Path(tmp), args.llama_server)
            runs[model] = measure(args, target)
    concurrency = [int(c) for c in args.concurrency.split(",")]
    table = tables(runs, args.workloads.split(","), concurrency)
    title = "## Speculative decoding against llama-server's (`bench_speculative.py`)"
    # Each set of concurrencies a section of its own: 16 streams take most of an hour's run,
    # and may be recorded apart from 1.
    tag = "" if args.concurrency == "1,16" else "_c" + args.concurrency.replace(",", "_")
    markers = tuple(m.replace("bench_speculative", f"bench_speculative{tag}") for m in MARKERS)
    title += f", {args.concurrency} streams" if tag else ""
    publish(markers, title, facts(args, argv, threads), table, not args.no_write)
    return 0


if __name__ == "__main__":
    cli(main)
