"""The servers of bench_swap.py (and bench_soak.py): localserve's and llama-cpp-python's argv,
the environment each runs in, starting one, and the admin calls a run must not see fail."""

from __future__ import annotations

import contextlib
import json
import os
import sys
from pathlib import Path
from typing import Any

from benchmarks._common import running, serve_command, tree_env
from benchmarks._swap_report import CTX_PER_SLOT, SLOTS, Model
from tests.support.daemons import operator_headers, post_json

# Settings that would silently change what a server does; every server gets them explicitly.
ENV_DROP = ("HOST", "PORT", "CONFIG_FILE", "MODEL")


def server_env(tree: str = "") -> dict[str, str]:
    """Our environment without settings that would change what a server does; with `tree`,
    localserve is imported from that checkout."""
    env = {
        k: v for k, v in os.environ.items() if k not in ENV_DROP and not k.startswith("LOCALSERVE_")
    }
    return tree_env(tree, env) if tree else env


def localserve_cmd(
    port: int, models_: list[Model], budget: int, threads: int, extra: tuple[str, ...] = ()
) -> list[str]:
    args = [a for m in models_ for a in ("--model", m.ref)]
    return serve_command(
        [
            *args,
            "--parallel",
            str(SLOTS),
            "--ctx",
            str(CTX_PER_SLOT),
            "--threads",
            str(threads),
            "--memory-budget",
            str(budget),
            *extra,
        ],
        port,
    )


def llama_cpp_cmd(port: int, models_: list[Model], threads: int | None, logdir: Path) -> list[str]:
    # One n_ctx for its one sequence: llama_cpp.server serves a request at a time.
    config = {
        "host": "127.0.0.1",
        "port": port,
        "interrupt_requests": False,
        "models": [
            {
                "model": m.path,
                "model_alias": m.name,
                "n_ctx": CTX_PER_SLOT,
                **({"n_threads": threads, "n_threads_batch": threads} if threads else {}),
                **({"chat_format": m.chat_format} if m.chat_format else {}),
            }
            for m in models_
        ],
    }
    path = logdir / "llama_cpp_config.json"
    path.write_text(json.dumps(config, indent=2))
    return [sys.executable, "-m", "llama_cpp.server", "--config_file", str(path)]


def server(
    cmd: list[str], ready_path: str, port: int, log: Path, tree: str = ""
) -> contextlib.AbstractContextManager[str]:
    return running(cmd, port, ready_path, log, env=server_env(tree))


def post_ok(url: str, body: dict[str, Any]) -> Any:
    """POST to a daemon whose answer must be 200; anything else ends the run. As the operator,
    as the CLI would be: a load names a model by its file."""
    status, answer = post_json(url, body, timeout=300, headers=operator_headers(url))
    if status != 200:
        raise RuntimeError(f"POST {url} -> HTTP {status}: {str(answer)[:300]!r}")
    return answer
