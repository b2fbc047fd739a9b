"""The name grammar: what the store accepts, and everything that could escape it refused."""

from __future__ import annotations

from pathlib import Path

import pytest

from localserve.store.hub import parse_ref
from localserve.store.manifest import Manifest
from localserve.store.model_store import ModelStore
from localserve.store.names import BadName, ModelName, parse_digest, parse_name

ESCAPES = [
    "..",
    "../etc",
    "a/../b",
    "/etc/passwd",
    "a/b",
    "a\\b",
    "C:\\x",
    "a\0b",
    "",
    ":x",
    "x:",
    "x:../y",
    "x:a/b",
]


def test_a_name_without_a_tag_is_latest() -> None:
    assert parse_name("smollm2") == ModelName("smollm2", "latest")


def test_names_are_case_insensitive() -> None:
    assert parse_name("Llama3.2:1B") == ModelName("llama3.2", "1b")


@pytest.mark.parametrize("text", ESCAPES)
def test_a_name_that_could_escape_the_store_is_refused(text: str) -> None:
    with pytest.raises(BadName):
        parse_name(text)


@pytest.mark.parametrize(
    "ref",
    [
        "hf://org/repo/../../etc/passwd",
        "hf://org/../x.gguf",
        "hf://../repo/x.gguf",
        "hf:///abs/x.gguf",
        "hf://org/repo//x.gguf",
        "hf://org/repo/a\\b.gguf",
        "hf://org/repo/x.gguf\0",
        "hf://org/repo/%2e%2e/x.gguf",
        "org/..:Q4_K_M",
        "org/repo:Q4/../x",
        "hf://org/repo/x.gguf?download=1",
    ],
)
def test_a_reference_that_could_escape_is_refused(ref: str) -> None:
    with pytest.raises(BadName):
        parse_ref(ref)


def test_a_revision_that_could_escape_is_refused() -> None:
    with pytest.raises(BadName):
        parse_ref("hf://org/repo/x.gguf", revision="../../x")


@pytest.mark.parametrize(
    "digest",
    ["sha256:../../etc/passwd", "sha256:" + "g" * 64, "md5:" + "a" * 32, "sha256:" + "a" * 63],
)
def test_a_digest_must_be_sha256_hex(digest: str) -> None:
    with pytest.raises(BadName):
        parse_digest(digest)


def test_a_manifest_with_a_traversing_digest_is_not_read(tmp_path: Path) -> None:
    store = ModelStore(tmp_path)
    path = store.manifest_path(parse_name("evil"))
    path.parent.mkdir(parents=True)
    path.write_text(
        '{"schema": 1, "name": "evil:latest", "format": "gguf", '
        '"files": [{"path": "m.gguf", "size": 1, "digest": "sha256:../../../etc/passwd"}]}'
    )
    assert store.read(parse_name("evil")) is None
    assert store.manifests_on_disk() == []


def test_a_manifest_with_a_traversing_file_path_is_refused() -> None:
    text = (
        '{"schema": 1, "name": "evil:latest", "format": "onnx", '
        '"files": [{"path": "../x", "size": 1, "digest": "sha256:' + "a" * 64 + '"}]}'
    )
    with pytest.raises(BadName):
        Manifest.from_json(text)
