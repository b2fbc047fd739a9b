"""An uploaded batch file's lines checked in a child process (upload.py's LineChecker, #57): the
same verdicts as check_file's in the daemon, and the event loop runs on meanwhile, where a
thread's json.loads held it (one 16 MiB line: 1.5 s)."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
from aiohttp import web

from localserve.ground.errors import BadRequest
from localserve.server.batches.upload import LINE_CHECKER, LineChecker, install

LINE = {"custom_id": "a", "method": "POST", "url": "/v1/completions", "body": {"prompt": "x"}}


def written(tmp_path: Path, *lines: bytes) -> Path:
    path = tmp_path / "input.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n")
    return path


async def checked(
    path: Path, max_lines: int = 10, max_values: int = 1000
) -> tuple[int, frozenset[str]]:
    checker = LineChecker()
    try:
        return await checker.check(path, max_lines, max_values)
    finally:
        checker.close()


def test_a_bad_line_is_refused_as_check_file_words_it(tmp_path: Path) -> None:
    path = written(tmp_path, json.dumps(LINE).encode(), b"{nope")
    with pytest.raises(BadRequest, match=r"^line 2 of the file is not valid JSON") as refused:
        asyncio.run(checked(path))
    assert refused.value.param == "file"


def test_a_line_of_more_values_than_the_bound_is_refused_naming_it(tmp_path: Path) -> None:
    line = {**LINE, "body": {"prompt": [[1]] * 20}}
    path = written(tmp_path, json.dumps(line).encode())
    with pytest.raises(
        BadRequest, match=r"line 1 of the file holds \d+ JSON values.*\(max_json_values\)"
    ):
        asyncio.run(checked(path, max_values=20))


def test_a_good_file_comes_back_as_its_requests_and_their_urls(tmp_path: Path) -> None:
    verdict = asyncio.run(checked(written(tmp_path, json.dumps(LINE).encode())))
    assert verdict == (1, frozenset({"/v1/completions"}))


def test_the_event_loop_runs_while_a_large_line_is_checked(tmp_path: Path) -> None:
    ids = b"[" + b"12345," * (1_400_000) + b"1]"  # 8 MiB: a thread held the loop for its parse
    path = written(tmp_path, json.dumps(LINE).encode()[:-5] + ids + b"}}")

    async def run() -> tuple[float, float]:
        task = asyncio.ensure_future(checked(path, max_values=2_000_000))
        started = last = time.monotonic()
        longest = 0.0
        while not task.done():
            await asyncio.sleep(0.005)
            now = time.monotonic()
            longest, last = max(longest, now - last), now
        await task
        return longest, last - started

    longest, took = asyncio.run(run())
    assert longest < took / 4, f"the loop stood {longest:.3f} s of the check's {took:.3f} s"


def test_the_app_closes_its_checker_on_cleanup(tmp_path: Path) -> None:
    async def run() -> LineChecker:
        app = web.Application()
        install(app)
        checker = app[LINE_CHECKER]
        app.freeze()
        await app.startup()
        await checker.check(written(tmp_path, json.dumps(LINE).encode()), 10, 1000)
        assert checker._pool is not None
        await app.cleanup()
        return checker

    assert asyncio.run(run())._pool is None


# A daemon: one check made its child, whose pid it says; then it waits to be killed.
DAEMON = """
import asyncio, multiprocessing, sys
from pathlib import Path
from localserve.server.batches.upload import LineChecker

async def main():
    await LineChecker().check(Path(sys.argv[1]), 10, 1000)
    print(*(p.pid for p in multiprocessing.active_children()), flush=True)
    await asyncio.sleep(60)

asyncio.run(main())
"""


def test_the_child_ends_when_the_daemon_is_killed(tmp_path: Path) -> None:
    path = written(tmp_path, json.dumps(LINE).encode())
    daemon = subprocess.Popen(
        [sys.executable, "-c", DAEMON, str(path)], stdout=subprocess.PIPE, text=True
    )
    assert daemon.stdout is not None
    (child,) = (psutil.Process(int(pid)) for pid in daemon.stdout.readline().split())
    daemon.kill()
    daemon.wait()
    deadline = time.monotonic() + 10
    while child.is_running() and child.status() != psutil.STATUS_ZOMBIE:
        assert time.monotonic() < deadline, "the child outlived the daemon"
        time.sleep(0.05)
