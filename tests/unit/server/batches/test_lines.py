"""A batch's input lines: what an upload refuses and why, the endpoint check at creation, the
metadata, and where a job resumes (the custom_ids its output and error files hold, a torn last
line not counted and cut off)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from localserve.ground.errors import BadRequest
from localserve.server.batches import disk
from localserve.server.batches.lines import (
    check_endpoint,
    check_file,
    check_metadata,
    done_ids,
    parse_line,
    window_seconds,
)
from localserve.server.batches.upload import _safe_name


def line(custom_id: str = "a", url: str = "/v1/embeddings", **extra: object) -> bytes:
    value = {"custom_id": custom_id, "method": "POST", "url": url, "body": {"input": "x"}}
    return json.dumps({**value, **extra}).encode() + b"\n"


def test_a_good_line_is_read_and_blank_lines_are_skipped() -> None:
    parsed = parse_line(line("q1"), 3)
    assert parsed is not None
    assert (parsed.number, parsed.custom_id, parsed.url, parsed.body) == (
        3,
        "q1",
        "/v1/embeddings",
        {"input": "x"},
    )
    assert parse_line(b"  \n", 4) is None
    assert check_file([line("a"), b"\n", line("b", "/v1/completions")], 10) == (
        2,
        frozenset({"/v1/embeddings", "/v1/completions"}),
    )


@pytest.mark.parametrize(
    ("raw", "words"),
    [
        (b"{nope\n", "is not valid JSON"),
        (b"[1, 2]\n", "must be a JSON object"),
        (line(custom_id=""), "needs a custom_id"),
        (line(custom_id=7), "needs a custom_id"),  # type: ignore[arg-type]
        (line("x" * 513), "longer than 512"),
        (line(method="GET"), '"method": "POST"'),
        (line(url="/v1/images/generations"), "a batch runs one of"),
        (line(body="text"), "needs a body"),
        (line(body={"stream": True}), "asks to stream"),
        (b"[" * 100 + b"]" * 100, "deeper than 64 levels"),
    ],
    ids=[
        "json",
        "object",
        "empty-id",
        "id-type",
        "long-id",
        "method",
        "url",
        "body",
        "stream",
        "deep",
    ],
)
def test_a_bad_line_is_refused_naming_its_number(raw: bytes, words: str) -> None:
    with pytest.raises(BadRequest) as caught:
        check_file([line("first"), raw], 10)
    assert words in str(caught.value)
    assert str(caught.value).startswith("line 2 of the file")
    assert caught.value.param == "file"


def test_duplicate_custom_ids_too_many_lines_and_an_empty_file_are_refused() -> None:
    with pytest.raises(BadRequest, match="line 3 of the file repeats custom_id 'a'"):
        check_file([line("a"), line("b"), line("a")], 10)
    with pytest.raises(BadRequest, match="more than 2 requests.*batch_lines"):
        check_file([line("a"), line("b"), line("c")], 2)
    with pytest.raises(BadRequest, match="holds no requests"):
        check_file([b"\n"], 2)


def test_a_batch_runs_one_endpoint_of_three_in_the_one_window() -> None:
    check_endpoint({"/v1/embeddings"}, "/v1/embeddings")
    with pytest.raises(BadRequest) as caught:
        check_endpoint({"/v1/embeddings", "/v1/completions"}, "/v1/embeddings")
    assert caught.value.param == "input_file_id" and "/v1/completions" in str(caught.value)
    with pytest.raises(BadRequest) as caught:
        check_endpoint(set(), "/v1/images")
    assert caught.value.param == "endpoint"
    assert window_seconds("24h") == 86400
    with pytest.raises(BadRequest) as caught:
        window_seconds("1h")
    assert caught.value.param == "completion_window"


def test_metadata_is_openais_sixteen_short_strings() -> None:
    assert check_metadata(None) is None
    assert check_metadata({"k": "v"}) == {"k": "v"}
    for bad in ({"k": 1}, {"k" * 65: "v"}, {"k": "v" * 513}, {str(i): "v" for i in range(17)}, []):
        with pytest.raises(BadRequest):
            check_metadata(bad)


def test_a_job_resumes_after_the_whole_lines_and_a_torn_one_is_cut_off(tmp_path: Path) -> None:
    output = tmp_path / "output.jsonl"
    disk.append_line(output, {"custom_id": "a", "response": {}})
    disk.append_line(output, {"custom_id": "b", "response": {}})
    with open(output, "ab") as f:
        f.write(b'{"custom_id": "c", "resp')  # a kill -9 mid-write
    whole = disk.trim_torn_tail(output)
    assert done_ids(whole) == {"a", "b"}
    assert output.read_bytes() == whole and whole.endswith(b"\n")
    disk.append_line(output, {"custom_id": "c", "response": {}})
    assert done_ids(output.read_bytes()) == {"a", "b", "c"}
    assert disk.trim_torn_tail(tmp_path / "missing.jsonl") == b""


def test_a_record_is_replaced_whole(tmp_path: Path) -> None:
    record = tmp_path / "job.json"
    disk.write_json(record, {"status": "in_progress"})
    disk.write_json(record, {"status": "completed"})
    assert disk.read_json(record) == {"status": "completed"}
    assert [p.name for p in tmp_path.iterdir()] == ["job.json"]  # no temporary left
    record.write_text("{torn")
    assert disk.read_json(record) is None


def test_an_uploaded_files_name_is_its_last_part_printable_and_unquoted() -> None:
    assert _safe_name("C:\\in\\b.jsonl") == "b.jsonl"
    assert _safe_name("../../etc/passwd") == "passwd"
    assert _safe_name('q"\r\nX: y.jsonl') == "q___X: y.jsonl"
    assert _safe_name(None) == _safe_name("") == "upload.jsonl"
