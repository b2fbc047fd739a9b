"""OpenAI's Batch API through the official `openai` client, against live daemons serving the
embedded SmolLM2: upload, create, poll to `completed`, download the output and correlate its
lines by custom_id (chat completions, text completions, embeddings); refusals in OpenAI's
error format; a batch cancelled mid-way; a daemon killed with SIGKILL mid-job and started
again on the same state folder, after which the job completes with every custom_id exactly
once. Each daemon has a state folder of its own (where the files and jobs live)."""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import openai
import pytest

from tests.support import daemons
from tests.support.cli_support import cli_env, localserve
from tests.support.helpers import MODEL
from tests.support.live import start_daemon
from tests.support.residency_support import openai_client, poll

ARGS = ("--model", MODEL, "--parallel", "4", "--ctx", "512")
# Small limits, so that the refusals are quick to reach.
LIMITS = ("--batch-file-size", "64KiB", "--batch-lines", "50", "--max-json-values", "1000")
WIDTH = 576  # SmolLM2-135M's hidden size
BATCH_TIMEOUT_S = 300.0


def chat_line(custom_id: str, text: str, max_tokens: int = 8, model: str = MODEL) -> dict:
    body = {
        "model": model,
        "messages": [{"role": "user", "content": text}],
        "max_tokens": max_tokens,
        "temperature": 0,
    }
    return {"custom_id": custom_id, "method": "POST", "url": "/v1/chat/completions", "body": body}


def jsonl(lines: list[dict]) -> bytes:
    return b"".join(json.dumps(line).encode() + b"\n" for line in lines)


def upload(client: openai.OpenAI, lines: list[dict], name: str = "input.jsonl") -> Any:
    return client.files.create(file=(name, io.BytesIO(jsonl(lines))), purpose="batch")


def run_batch(client: openai.OpenAI, lines: list[dict], endpoint: str) -> Any:
    stored = upload(client, lines)
    batch = client.batches.create(
        input_file_id=stored.id,
        endpoint=endpoint,
        completion_window="24h",
        metadata={"test": "batches"},
    )
    assert batch.status == "validating" and batch.request_counts.total == len(lines)
    return batch


def ended(client: openai.OpenAI, batch_id: str, timeout: float = BATCH_TIMEOUT_S) -> Any:
    def done() -> Any:
        batch = client.batches.retrieve(batch_id)
        return batch if batch.status in ("completed", "failed", "cancelled", "expired") else None

    return poll(f"batch {batch_id} ending", done, timeout)


def lines_of(client: openai.OpenAI, file_id: str | None) -> list[dict]:
    if file_id is None:
        return []
    return [json.loads(raw) for raw in client.files.content(file_id).content.splitlines()]


def by_id(entries: list[dict]) -> dict[str, dict]:
    ids = Counter(e["custom_id"] for e in entries)
    assert all(n == 1 for n in ids.values()), f"custom_ids written twice: {ids}"
    return {e["custom_id"]: e for e in entries}


def metric_values(url: str) -> dict[str, float]:
    status, _, text = daemons.raw_request(f"{url}/metrics")
    assert status == 200
    values = {}
    for line in text.decode().splitlines():
        if line and not line.startswith("#"):
            name, _, value = line.rpartition(" ")
            values[name] = float(value)
    return values


@pytest.fixture(scope="module")
def daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    state = tmp_path_factory.mktemp("batches-state")
    proc, url = start_daemon((*ARGS, *LIMITS), env={"XDG_STATE_HOME": str(state)})
    try:
        yield url
    finally:
        daemons.discard(proc)


@pytest.fixture
def client(daemon: str) -> Iterator[openai.OpenAI]:
    with openai_client(daemon) as c:
        yield c


def test_a_chat_batch_completes_and_its_lines_correlate_by_custom_id(
    client: openai.OpenAI,
) -> None:
    questions = {f"q{i}": f"Say the number {i}." for i in range(6)}
    lines = [chat_line(cid, text) for cid, text in questions.items()]
    lines.append(chat_line("missing-model", "Hello", model="no-such-model"))
    batch = ended(client, run_batch(client, lines, "/v1/chat/completions").id)

    assert batch.status == "completed", batch
    assert batch.completed_at and batch.in_progress_at and batch.finalizing_at
    assert batch.metadata == {"test": "batches"}
    counts = batch.request_counts
    assert (counts.total, counts.completed, counts.failed) == (7, 6, 1)
    outputs = by_id(lines_of(client, batch.output_file_id))
    assert set(outputs) == set(questions)
    for entry in outputs.values():
        assert entry["id"].startswith("batch_req_") and entry["error"] is None
        response = entry["response"]
        assert response["status_code"] == 200 and response["request_id"]
        assert response["body"]["object"] == "chat.completion"
        assert response["body"]["usage"]["completion_tokens"] <= 8
    # A line's answer is the one the endpoint gives the same request directly (greedy).
    direct = client.chat.completions.create(**lines[2]["body"])
    answered = outputs["q2"]["response"]["body"]["choices"][0]["message"]["content"]
    assert answered == direct.choices[0].message.content
    errors = by_id(lines_of(client, batch.error_file_id))
    assert set(errors) == {"missing-model"}
    failed = errors["missing-model"]["response"]
    assert failed["status_code"] == 404 and failed["body"]["error"]["code"] == "model_not_found"

    output_file = client.files.retrieve(batch.output_file_id)
    assert output_file.purpose == "batch_output" and output_file.bytes > 0
    assert output_file.expires_at and output_file.expires_at > output_file.created_at
    assert batch.id in {b.id for b in client.batches.list(limit=100)}


def test_a_batchs_lines_run_at_background_priority(client: openai.OpenAI, daemon: str) -> None:
    """/metrics counts each generation under the priority class the engine ran it at: the
    lines of a batch under background, the same request sent directly under interactive."""

    def generations(priority: str) -> float:
        name = f'localserve_generations_total{{model="{MODEL}",priority="{priority}"}}'
        return metric_values(daemon).get(name, 0.0)

    before = {p: generations(p) for p in ("background", "interactive")}
    lines = [chat_line(f"b{i}", f"Say the number {i}.") for i in range(3)]
    batch = ended(client, run_batch(client, lines, "/v1/chat/completions").id)
    assert batch.status == "completed" and batch.request_counts.completed == 3, batch
    assert generations("background") == before["background"] + 3
    assert generations("interactive") == before["interactive"]
    client.chat.completions.create(**lines[0]["body"])
    assert generations("interactive") == before["interactive"] + 1
    assert generations("background") == before["background"] + 3


def test_embeddings_and_completions_batches(client: openai.OpenAI) -> None:
    texts = {"sky": "Why is the sky blue?", "cat": "The cat sat on the mat.", "hi": "hello"}
    lines = [
        {
            "custom_id": cid,
            "method": "POST",
            "url": "/v1/embeddings",
            "body": {"model": MODEL, "input": text},
        }
        for cid, text in texts.items()
    ]
    batch = ended(client, run_batch(client, lines, "/v1/embeddings").id)
    assert batch.status == "completed" and batch.error_file_id is None
    outputs = by_id(lines_of(client, batch.output_file_id))
    assert set(outputs) == set(texts)
    for entry in outputs.values():
        (item,) = entry["response"]["body"]["data"]
        assert len(item["embedding"]) == WIDTH

    body = {"model": MODEL, "prompt": "Once upon a time", "max_tokens": 6, "temperature": 0}
    line = {"custom_id": "story", "method": "POST", "url": "/v1/completions", "body": body}
    batch = ended(client, run_batch(client, [line], "/v1/completions").id)
    (entry,) = lines_of(client, batch.output_file_id)
    assert entry["custom_id"] == "story"
    assert entry["response"]["body"]["object"] == "text_completion"


def test_localserve_batches_lists_status_and_progress(
    client: openai.OpenAI, daemon: str, tmp_path: Path
) -> None:
    line = {
        "custom_id": "e",
        "method": "POST",
        "url": "/v1/embeddings",
        "body": {"model": MODEL, "input": "hello"},
    }
    batch = ended(client, run_batch(client, [line], "/v1/embeddings").id)
    done = localserve("batches", "--limit", "100", env=cli_env(tmp_path, daemon))
    assert done.returncode == 0, done.stderr
    (row,) = [r for r in done.stdout.splitlines() if r.startswith(batch.id)]
    assert row.split()[1:5] == ["completed", "/v1/embeddings", "1/1", "(100%)"]
    assert done.stdout.splitlines()[0].split() == [
        "ID",
        "STATUS",
        "ENDPOINT",
        "PROGRESS",
        "FAILED",
        "CREATED",
    ]


def test_files_are_listed_read_and_deleted(client: openai.OpenAI) -> None:
    lines = [chat_line("a", "Hi")]
    stored = upload(client, lines, "mine.jsonl")
    assert (stored.object, stored.purpose, stored.filename) == ("file", "batch", "mine.jsonl")
    assert stored.bytes == len(jsonl(lines)) and stored.expires_at > stored.created_at
    assert client.files.retrieve(stored.id).id == stored.id
    assert client.files.content(stored.id).content == jsonl(lines)
    assert stored.id in {f.id for f in client.files.list(purpose="batch")}
    assert client.files.delete(stored.id).deleted
    with pytest.raises(openai.NotFoundError):
        client.files.retrieve(stored.id)
    # A name is kept as its last part: it goes back in a header (in RFC 6266's filename*).
    odd = upload(client, lines, "C:\\in\\n\u00e4me.jsonl")
    assert odd.filename == "n\u00e4me.jsonl"
    assert client.files.content(odd.id).content == jsonl(lines)


@pytest.mark.parametrize(
    ("content", "words"),
    [
        (jsonl([chat_line("a", "x"), chat_line("a", "y")]), "line 2 of the file repeats"),
        (b'{"custom_id": "a", "method": "GET", "url": "/v1/embeddings", "body": {}}\n', "POST"),
        (b'{"custom_id": "a", "method": "POST", "url": "/v1/images", "body": {}}\n', "url"),
        (b'{"method": "POST", "url": "/v1/embeddings", "body": {}}\n', "custom_id"),
        (b"not json\n", "line 1 of the file is not valid JSON"),
        (jsonl([chat_line(f"n{i}", "x") for i in range(51)]), "batch_lines"),
        (jsonl([{**chat_line("a", "x"), "x": [[]] * 1000}]), "the items in them); at most 1000"),
    ],
    ids=["duplicate", "method", "url", "custom_id", "json", "too-many-lines", "values"],
)
def test_an_input_file_that_cannot_run_is_refused_on_upload(
    client: openai.OpenAI, content: bytes, words: str
) -> None:
    with pytest.raises(openai.BadRequestError) as caught:
        client.files.create(file=("bad.jsonl", io.BytesIO(content)), purpose="batch")
    assert words in caught.value.message
    assert caught.value.body["param"] == "file"


def test_refusals_name_the_field_and_the_limit(client: openai.OpenAI) -> None:
    with pytest.raises(openai.APIStatusError) as caught:
        client.files.create(file=("big.jsonl", io.BytesIO(b" " * 70_000)), purpose="batch")
    assert caught.value.status_code == 413 and "batch_file_size" in caught.value.message
    with pytest.raises(openai.BadRequestError) as caught:
        client.files.create(
            file=("a.jsonl", io.BytesIO(jsonl([chat_line("a", "x")]))), purpose="assistants"
        )
    assert caught.value.body["param"] == "purpose"
    stored = upload(client, [chat_line("a", "x")])
    with pytest.raises(openai.BadRequestError) as caught:
        client.batches.create(
            input_file_id=stored.id, endpoint="/v1/embeddings", completion_window="24h"
        )
    assert caught.value.body["param"] == "input_file_id"
    with pytest.raises(openai.BadRequestError) as caught:
        client.batches.create(
            input_file_id=stored.id,
            endpoint="/v1/chat/completions",
            completion_window="1h",  # type: ignore[arg-type]
        )
    assert caught.value.body["param"] == "completion_window"
    with pytest.raises(openai.NotFoundError):
        client.batches.create(
            input_file_id="file-nope", endpoint="/v1/chat/completions", completion_window="24h"
        )
    with pytest.raises(openai.NotFoundError):
        client.batches.retrieve("batch_nope")


def test_a_batch_cancelled_mid_way_keeps_what_it_answered(
    client: openai.OpenAI, daemon: str
) -> None:
    lines = [chat_line(f"c{i}", f"Write a story about the number {i}.", 24) for i in range(40)]
    batch = run_batch(client, lines, "/v1/chat/completions")
    poll(
        "two answers",
        lambda: client.batches.retrieve(batch.id).request_counts.completed >= 2,
        BATCH_TIMEOUT_S,
    )
    # The web page's figure: the running batches' requests, answered of all.
    metrics = metric_values(daemon)
    assert metrics["localserve_batch_requests"] >= 40
    assert metrics["localserve_batch_requests_done"] >= 2
    assert metrics['localserve_batches{status="in_progress"}'] >= 1
    cancelling = client.batches.cancel(batch.id)
    assert cancelling.status == "cancelling" and cancelling.cancelling_at

    batch = ended(client, batch.id)
    assert batch.status == "cancelled" and batch.cancelled_at
    outputs = by_id(lines_of(client, batch.output_file_id))
    errors = by_id(lines_of(client, batch.error_file_id))
    counts = batch.request_counts
    assert counts.total == 40 and 2 <= counts.completed < 40
    assert (counts.completed, counts.failed) == (len(outputs), len(errors))
    assert not set(outputs) & set(errors)
    with pytest.raises(openai.ConflictError):
        client.batches.cancel(batch.id)
    # Its input file was free to go once the batch ended.
    assert client.files.delete(batch.input_file_id).deleted


def test_a_job_resumes_after_the_daemon_is_killed_without_duplicate_or_missing_lines(
    tmp_path: Path,
) -> None:
    env = {"XDG_STATE_HOME": str(tmp_path / "state")}
    proc, url = start_daemon(ARGS, env=env)
    second: subprocess.Popen | None = None
    try:
        lines = [chat_line(f"k{i}", f"Tell me about the number {i}.", 12) for i in range(16)]
        with openai_client(url) as client:
            batch = run_batch(client, lines, "/v1/chat/completions")
            poll(
                "three answers",
                lambda: client.batches.retrieve(batch.id).request_counts.completed >= 3,
                BATCH_TIMEOUT_S,
            )
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        # Killed mid-job: some lines answered on disk, not all.
        written = tmp_path / "state/localserve/batches/jobs" / batch.id / "output.jsonl"
        assert 3 <= len(written.read_bytes().splitlines()) < 16

        second, url = start_daemon(ARGS, env=env)
        with openai_client(url) as client:
            batch = ended(client, batch.id)
            assert batch.status == "completed", batch
            counts = batch.request_counts
            assert (counts.total, counts.completed, counts.failed) == (16, 16, 0)
            outputs = by_id(lines_of(client, batch.output_file_id))  # each id once
            assert set(outputs) == {line["custom_id"] for line in lines}
            assert batch.error_file_id is None
        assert f"batch {batch.id} resumes" in daemons.log_text(second.log_path)
    finally:
        daemons.discard(proc)
        if second is not None:
            daemons.discard(second)


def test_a_daemon_with_an_api_key_runs_its_batches(tmp_path: Path) -> None:
    """The lines pass the guard as the CLI does (the operator's token; the key besides)."""
    env = {"XDG_STATE_HOME": str(tmp_path / "state")}
    proc, url = start_daemon((*ARGS, "--api-key", "sesame"), env=env)
    try:
        with openai.OpenAI(base_url=f"{url}/v1", api_key="sesame", max_retries=0) as client:
            body = {"model": MODEL, "input": "hello"}
            line = {"custom_id": "e", "method": "POST", "url": "/v1/embeddings", "body": body}
            batch = ended(client, run_batch(client, [line], "/v1/embeddings").id)
            assert batch.status == "completed" and batch.request_counts.completed == 1
        with openai.OpenAI(base_url=f"{url}/v1", api_key="wrong", max_retries=0) as client:
            with pytest.raises(openai.AuthenticationError):
                client.batches.list()
    finally:
        daemons.discard(proc)
