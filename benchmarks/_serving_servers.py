"""The servers bench_serving.py runs, one at a time: localserve (from this checkout, from the
--baseline-tree checkout, with /metrics off), llama-cpp-python's server (with localserve's thread
count or as shipped) and llama.cpp's own llama-server; their argv and starting one.

bench_serving.main sets LLAMA_SERVER_BIN and BASELINE_TREE from its arguments."""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator
from pathlib import Path

from benchmarks._common import BASE_SUFFIX, free_port, running, serve_command, tree_env

# "llama-cpp-python" gets localserve's thread count; "-default" runs it exactly as shipped
# (cpu_count // 2 threads), which is the baseline the engine issue names.
BASE = "localserve" + BASE_SUFFIX
SERVERS = ("localserve", BASE, "llama-cpp-python", "llama-cpp-python-default", "llama-server")
BASELINES = SERVERS[1:]
# localserve with /metrics off: --metrics-overhead runs it beside localserve (issue #18).
NO_METRICS = "localserve-no-metrics"
# llama.cpp's C++ server is not on PyPI: build it from the llama.cpp sources vendored in
# llama-cpp-python's sdist (same kernels) and name the binary with --llama-server.
LLAMA_SERVER_BIN = os.environ.get("LLAMA_SERVER", "")
# The checkout that localserve@base runs from (--baseline-tree).
BASELINE_TREE = ""


def server_command(name: str, model_path: str, port: int, threads: int) -> tuple[list[str], str]:
    """The argv that starts a server, and the path that answers 200 once it can serve."""
    if name in ("localserve", BASE, NO_METRICS):
        args = [
            "--model",
            "smollm2",
            "--parallel",
            "16",
            "--ctx",
            "2048",
            "--threads",
            str(threads),
            *(["--no-metrics"] if name == NO_METRICS else []),
        ]
        return serve_command(args, port), "/health"
    if name == "llama-server":
        cmd = [
            LLAMA_SERVER_BIN,
            "-m",
            model_path,
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "-np",
            "16",
            "-c",
            str(16 * 2048),
            "-t",
            str(threads),
            "-tb",
            str(threads),
        ]
        return cmd, "/health"
    cmd = [
        sys.executable,
        "-m",
        "llama_cpp.server",
        "--model",
        model_path,
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--n_ctx",
        "2048",
        "--interrupt_requests",
        "False",
    ]
    if name == "llama-cpp-python":
        # llama_cpp.server defaults to cpu_count // 2 decode threads while localserve uses all
        # cores; pinning both to the same count keeps the comparison about serving.
        cmd += ["--n_threads", str(threads), "--n_threads_batch", str(threads)]
    return cmd, "/v1/models"


@contextlib.contextmanager
def running_server(name: str, model_path: str, threads: int, logdir: Path) -> Iterator[str]:
    port = free_port()
    cmd, ready_path = server_command(name, model_path, port, threads)
    env = tree_env(BASELINE_TREE) if name == BASE else None
    with running(cmd, port, ready_path, logdir / f"{name}.log", env=env) as base:
        yield base
