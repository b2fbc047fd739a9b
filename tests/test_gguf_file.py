"""GGUF files are checked before llama.cpp sees them: truncated or foreign files are refused."""

from pathlib import Path

import pytest

from localserve.store.gguf_file import BadGGUF, read_header
from localserve.store.resolve import resolve

SMOLLM2 = Path(resolve("smollm2").path)


def test_real_model_header_reads_its_architecture_and_tensors() -> None:
    header = read_header(str(SMOLLM2))
    assert header.architecture == "llama"
    assert len(header.tensors) == 272
    assert 0 < header.weights_bytes < SMOLLM2.stat().st_size


def test_file_cut_in_its_tensor_data_is_refused_as_truncated(tmp_path: Path) -> None:
    cut = tmp_path / "cut.gguf"
    cut.write_bytes(SMOLLM2.read_bytes()[: SMOLLM2.stat().st_size // 2])
    with pytest.raises(BadGGUF, match="past the end of the file"):
        read_header(str(cut))


def test_file_cut_in_its_header_is_refused_as_truncated(tmp_path: Path) -> None:
    cut = tmp_path / "cut.gguf"
    with SMOLLM2.open("rb") as f:
        cut.write_bytes(f.read(100_000))
    with pytest.raises(BadGGUF, match="truncated"):
        read_header(str(cut))


def test_file_that_is_not_gguf_is_refused(tmp_path: Path) -> None:
    other = tmp_path / "notes.gguf"
    other.write_bytes(b"just some text, not a model" * 10)
    with pytest.raises(BadGGUF, match="magic"):
        read_header(str(other))
