"""A model loaded with a q8_0 KV cache (#47): it answers, its pool reserves what llama.cpp
allocates for that cache (about 34/64 of an f16 one's), and /api/ps and `localserve ps` say
which type it runs with."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from localserve.engine.worker_client.sizing import layered_estimate
from localserve.ground.settings import Settings
from localserve.store.resolve import resolve
from tests.support.cli_support import cli_env, localserve
from tests.support.daemons import get_json, post_json
from tests.support.live import running_daemon

ARGS = ["--parallel", "2", "--ctx", "1024"]


@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    args = ["--model", "smollm2", *ARGS, "--kv-cache-type", "q8_0"]
    with running_daemon(args) as (_, url):
        yield url


def loaded(url: str) -> dict:
    return get_json(f"{url}/api/ps")["models"][0]["localserve"]


def test_a_model_with_a_q8_0_cache_answers(url: str) -> None:
    ask = {"role": "user", "content": "Say hi"}
    status, answer = post_json(
        f"{url}/v1/chat/completions",
        {"model": "smollm2", "messages": [ask], "max_tokens": 8, "temperature": 0},
    )
    assert status == 200 and answer["choices"][0]["message"]["content"].strip()


def test_its_pool_reserves_the_q8_0_cache_llama_cpp_allocates(url: str) -> None:
    model = loaded(url)
    reserved, allocated = model["memory_estimate"]["kv_cache"], model["placement"]["buffers"]
    assert reserved == pytest.approx(allocated["cpu kv"], rel=0.02)
    f16 = sum(layered_estimate(resolve("smollm2"), Settings(parallel=2, ctx=1024)).layer_kv)
    assert reserved == pytest.approx(f16 * 34 / 64, rel=0.01)


def test_api_ps_and_localserve_ps_show_the_cache_type(url: str, tmp_path: Path) -> None:
    assert (loaded(url)["kv_cache_type"], loaded(url)["flash_attention"]) == ("q8_0", "auto")
    done: subprocess.CompletedProcess[str] = localserve("ps", env=cli_env(tmp_path, url))
    header, row = done.stdout.splitlines()[:2]
    assert "KV CACHE" in header and "q8_0" in row.split()
