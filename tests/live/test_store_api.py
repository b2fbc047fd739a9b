"""The store through a live daemon: Ollama's official client for list, show, pull and delete;
OpenAI's for /v1/models and for chatting with a model that was just pulled."""

from __future__ import annotations

import hashlib
import os
import signal
import threading
import time
from pathlib import Path

import ollama
import openai
import pytest

from tests.support.daemons import get_json, post_json
from tests.support.hub_server import Hub, sha256_of
from tests.support.live import CLIENT_TIMEOUT_S
from tests.support.store_support import SMOL_FILE, SMOL_REPO, hub, hub_env, smol_bytes  # noqa: F401 - fixtures

ARGS = ("--parallel", "2", "--ctx", "512")


@pytest.fixture
def store_daemon(hub_env: Hub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, daemon_factory):
    monkeypatch.setenv("LOCALSERVE_MODELS", str(tmp_path / "store"))
    proc, url = daemon_factory(ARGS)
    return proc, url


@pytest.fixture
def olla(store_daemon) -> ollama.Client:
    return ollama.Client(host=store_daemon[1], timeout=CLIENT_TIMEOUT_S)


def names(client: ollama.Client) -> set[str]:
    return {m.model for m in client.list().models}


def test_list_shows_the_embedded_default_on_an_empty_store(olla: ollama.Client) -> None:
    models = olla.list().models
    assert [m.model for m in models] == ["smollm2:latest"]
    assert models[0].details.quantization_level == "Q4_1"
    assert models[0].size == smol_bytes().stat().st_size


def test_pull_streams_progress_then_lists_the_model(olla: ollama.Client) -> None:
    updates = list(olla.pull("tiny:135m", stream=True))
    statuses = [u.status for u in updates]
    assert statuses[0] == "pulling manifest" and statuses[-1] == "success"
    sizes = [u for u in updates if u.total]
    assert sizes[-1].completed == sizes[-1].total == smol_bytes().stat().st_size
    listed = {m.model: m for m in olla.list().models}
    assert listed["tiny:135m"].digest == sha256_of(smol_bytes())


def test_pull_by_hf_reference_without_streaming(olla: ollama.Client) -> None:
    assert olla.pull(f"hf://{SMOL_REPO}/{SMOL_FILE}", stream=False).status == "success"
    assert "smollm2-135m-instruct-q4_1:latest" in names(olla)


def test_pull_of_an_unknown_name_is_a_404_with_suggestions(olla: ollama.Client) -> None:
    with pytest.raises(ollama.ResponseError) as info:
        olla.pull("lama3")
    assert info.value.status_code == 404
    assert "did you mean llama3" in info.value.error


def test_pull_of_a_traversing_reference_is_a_400(olla: ollama.Client) -> None:
    with pytest.raises(ollama.ResponseError) as info:
        olla.pull("hf://org/repo/../../etc/passwd")
    assert info.value.status_code == 400


def test_a_failed_download_ends_the_stream_with_an_error(olla: ollama.Client, hub: Hub) -> None:
    hub.add("gated/repo", "model.gguf", smol_bytes(), status=401)
    with pytest.raises(ollama.ResponseError, match="HF_TOKEN"):
        list(olla.pull("hf://gated/repo/model.gguf", stream=True))
    assert "model:latest" not in names(olla)


def test_show_describes_the_model_from_its_file(olla: ollama.Client) -> None:
    info = olla.show("smollm2")
    assert info.details.family == "llama"
    assert info.details.quantization_level == "Q4_1"
    assert info.modelinfo["general.parameter_count"] == 134515008
    assert info.modelinfo["llama.embedding_length"] == 576
    assert info.modelinfo["general.basename"]
    assert "im_start" in info.template
    assert info.license == "apache-2.0"


def test_show_gives_the_context_a_request_gets_the_same_as_ps_and_v1_models(
    olla: ollama.Client, store_daemon
) -> None:
    url = store_daemon[1]
    before = olla.show("smollm2")
    assert before.modelinfo["llama.context_length"] == 512, "a slot's, not the 8192 trained"
    assert before.parameters == 'num_ctx 512\nstop "<|im_end|>"'
    olla.generate(model="smollm2", prompt="Hi", options={"num_predict": 1})
    (loaded,) = olla.ps().models
    listed = {m["id"]: m for m in get_json(f"{url}/v1/models")["data"]}
    assert loaded.model_dump()["context_length"] == listed["smollm2"]["context_length"] == 512
    assert olla.show("smollm2").modelinfo["llama.context_length"] == 512


def test_show_lists_what_the_model_can_be_asked_for(olla: ollama.Client) -> None:
    assert olla.show("smollm2").capabilities == ["completion", "embedding"]


def test_show_takes_the_older_name_field_too(store_daemon) -> None:
    status, body = post_json(f"{store_daemon[1]}/api/show", {"name": "smollm2"})
    assert status == 200 and body["details"]["family"] == "llama"


def test_list_gives_the_embedded_model_the_sha256_of_its_file(olla: ollama.Client) -> None:
    (model,) = olla.list().models
    assert model.digest == hashlib.sha256(smol_bytes().read_bytes()).hexdigest()


def test_show_of_a_missing_model_is_a_404(olla: ollama.Client) -> None:
    with pytest.raises(ollama.ResponseError) as info:
        olla.show("not-a-model")
    assert info.value.status_code == 404


def test_delete_removes_a_pulled_model(olla: ollama.Client) -> None:
    olla.pull("tiny:135m")
    olla.delete("tiny:135m")
    assert "tiny:135m" not in names(olla)
    with pytest.raises(ollama.ResponseError) as info:
        olla.delete("tiny:135m")
    assert info.value.status_code == 404


def test_a_pulled_model_serves_through_the_api(olla: ollama.Client, store_daemon) -> None:
    olla.pull("tiny:135m")
    client = openai.OpenAI(
        base_url=f"{store_daemon[1]}/v1", api_key="-", timeout=CLIENT_TIMEOUT_S, max_retries=0
    )
    ids = {m.id for m in client.models.list().data}
    assert {"tiny:135m", "smollm2"} <= ids
    reply = client.chat.completions.create(
        model="tiny:135m",
        messages=[{"role": "user", "content": "Say hello."}],
        max_tokens=8,
        temperature=0,
    )
    assert reply.choices[0].message.content
    assert reply.model == "tiny:135m"


def test_ps_gives_a_pulled_model_the_digest_list_gives_it(olla: ollama.Client) -> None:
    olla.pull("tiny:135m")
    olla.generate(model="tiny:135m", prompt="")  # an empty generate loads it
    listed = {m.model: m.digest for m in olla.list().models}
    (entry,) = [m for m in olla.ps().models if m.model.startswith("tiny:135m")]  # tag and all
    assert entry.digest == listed["tiny:135m"] == sha256_of(smol_bytes())


def test_a_request_naming_a_path_is_refused(store_daemon) -> None:
    client = openai.OpenAI(
        base_url=f"{store_daemon[1]}/v1", api_key="-", timeout=CLIENT_TIMEOUT_S, max_retries=0
    )
    with pytest.raises(openai.BadRequestError, match="not a model name"):
        client.chat.completions.create(
            model=str(smol_bytes()), messages=[{"role": "user", "content": "hi"}]
        )


def _pull_ignoring_errors(url: str, ref: str) -> None:
    try:
        ollama.Client(host=url, timeout=CLIENT_TIMEOUT_S).pull(ref, stream=False)
    except Exception:  # the daemon is killed under it on purpose
        pass


def test_a_pull_killed_part_way_resumes_and_ends_with_the_right_sha256(
    hub_env: Hub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, daemon_factory
) -> None:
    store = tmp_path / "store"
    monkeypatch.setenv("LOCALSERVE_MODELS", str(store))
    size = smol_bytes().stat().st_size
    hub_env.add("slow/repo", "model.gguf", smol_bytes(), bytes_per_s=size / 8)  # ~8 s in all
    proc, url = daemon_factory(ARGS)
    # The pull runs inside the daemon; this client only waits, and sees the connection drop.
    puller = threading.Thread(target=_pull_ignoring_errors, args=(url, "hf://slow/repo/model.gguf"))
    puller.start()
    partial = store / "partial" / f"sha256-{sha256_of(smol_bytes())}.partial"
    deadline = time.monotonic() + 60
    while not (partial.exists() and partial.stat().st_size > size // 4):
        assert time.monotonic() < deadline, "the pull never got a quarter of the way"
        time.sleep(0.05)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    puller.join()
    kept = partial.stat().st_size
    assert 0 < kept < size

    hub_env.repos["slow/repo"]["model.gguf"].bytes_per_s = None
    _, url2 = daemon_factory(ARGS)
    client = ollama.Client(host=url2, timeout=CLIENT_TIMEOUT_S)
    assert client.pull("hf://slow/repo/model.gguf", stream=False).status == "success"
    resumed_from = [int(r.split("=")[1].rstrip("-")) for r in hub_env.ranges_for("model.gguf") if r]
    assert resumed_from and resumed_from[-1] >= kept
    listed = {m.model: m for m in client.list().models}
    assert listed["model:latest"].digest == sha256_of(smol_bytes())
    assert not partial.exists()
