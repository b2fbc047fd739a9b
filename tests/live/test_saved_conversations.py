"""A conversation survives its model's unloading: its cells wait on disk, and when the model
loads again the conversation restores them instead of prefilling, answering exactly as it would
had the model stayed."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path

import openai
import pytest

from tests.support.gguf_copy import model_file
from tests.support.helpers import raw_request
from tests.support.live import CLIENT_TIMEOUT_S
from tests.support.residency_support import poll

DOCUMENT = (
    "Here is a document about the river Danube. The Danube flows from the Black Forest in "
    "Germany through Vienna, Bratislava, Budapest and Belgrade to the Black Sea, crossing or "
    "bordering ten countries. It is Europe's second-longest river after the Volga. "
    "Which city does it reach last?"
)
ONE_SLOT = ("--parallel", "1", "--ctx", "1024")


@pytest.fixture
def state_home(tmp_path: Path) -> dict[str, str]:
    """A state folder of this test's own, so no other daemon's conversations are found."""
    return {"XDG_STATE_HOME": str(tmp_path / "state")}


def ask(url: str, model: str, keep_alive: int | None = None):
    client = openai.OpenAI(
        base_url=f"{url}/v1", api_key="-", timeout=CLIENT_TIMEOUT_S, max_retries=0
    )
    extra = {"keep_alive": keep_alive} if keep_alive is not None else None
    with client:
        return client.chat.completions.create(
            model=model,
            temperature=0,
            max_tokens=24,
            messages=[{"role": "user", "content": DOCUMENT}],
            extra_body=extra,
        )


def resident(url: str) -> list[str]:
    status, _, body = raw_request(f"{url}/api/ps")
    assert status == 200
    return [m["name"] for m in body["models"]]


def unloaded(url: str, model: str) -> None:
    poll(f"{model} leaving /api/ps", lambda: not any(n.startswith(model) for n in resident(url)))


def saved_files(state: dict[str, str]) -> list[Path]:
    return list(Path(state["XDG_STATE_HOME"]).glob("localserve/conversations/*/*/*.kv"))


def saved(state: dict[str, str]) -> list[Path]:
    """The files an unload wrote: its model leaves /api/ps before the worker has written them."""
    return poll("the conversations written to disk", lambda: saved_files(state))


def test_a_conversation_resumes_from_disk_after_its_model_was_unloaded(
    daemon_factory, state_home
) -> None:
    _, url = daemon_factory(("--model", "smollm2", *ONE_SLOT), env=state_home)
    ask(url, "smollm2")
    # Asked again while the slot holds it: only the last prompt token runs, as after a restore.
    kept = ask(url, "smollm2", keep_alive=0)
    unloaded(url, "smollm2")
    saved(state_home)
    restored = ask(url, "smollm2")
    assert restored.usage.prompt_tokens_details.cached_tokens == restored.usage.prompt_tokens - 1
    assert restored.choices[0].message.content == kept.choices[0].message.content
    status, _, body = raw_request(f"{url}/api/ps")
    assert body["models"][0]["localserve"]["prompt_cache"]["disk_hits"] == 1


def saved_then_changed(
    daemon_factory, state_home, tmp_path: Path, change: Callable[[Path], object]
) -> None:
    """A copy of the model served, its conversation saved as it unloads, the copy changed by
    `change`; then the same conversation must start from nothing, its saved cells dropped."""
    copy = Path(shutil.copy(model_file(), tmp_path / "danube.gguf"))
    _, url = daemon_factory(("--model", str(copy), *ONE_SLOT), env=state_home)
    ask(url, "danube", keep_alive=0)
    unloaded(url, "danube")
    saved(state_home)
    change(copy)
    again = ask(url, "danube")
    assert again.usage.prompt_tokens_details.cached_tokens == 0
    assert not saved_files(state_home)


def test_a_changed_model_file_drops_its_saved_conversations(
    daemon_factory, state_home, tmp_path: Path
) -> None:
    # The file changed: what its old cells hold can no longer be trusted.
    saved_then_changed(daemon_factory, state_home, tmp_path, os.utime)


def test_a_model_file_edited_at_the_same_size_and_time_drops_its_saved_conversations(
    daemon_factory, state_home, tmp_path: Path
) -> None:
    saved_then_changed(daemon_factory, state_home, tmp_path, flip_a_bit_in_the_middle)


def flip_a_bit_in_the_middle(path: Path) -> None:
    """An edit in place among the weights, far from the file's first and last MiB, that leaves
    its size and modification time as they were (the lowest bit of a quantized weight, a scale
    or a float: the model still loads and answers)."""
    before = os.stat(path)
    with open(path, "r+b") as f:
        f.seek(before.st_size // 2)
        byte = f.read(1)[0]
        f.seek(before.st_size // 2)
        f.write(bytes([byte ^ 1]))
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    after = os.stat(path)
    assert (after.st_size, after.st_mtime_ns) == (before.st_size, before.st_mtime_ns)


def test_saved_conversations_zero_keeps_nothing_on_disk(daemon_factory, state_home) -> None:
    args = ("--model", "smollm2", *ONE_SLOT, "--saved-conversations", "0")
    _, url = daemon_factory(args, env=state_home)
    ask(url, "smollm2", keep_alive=0)
    unloaded(url, "smollm2")
    again = ask(url, "smollm2")
    assert again.usage.prompt_tokens_details.cached_tokens == 0
    assert not saved_files(state_home)
