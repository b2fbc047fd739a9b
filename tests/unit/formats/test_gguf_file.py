"""GGUF files are checked before llama.cpp sees them: truncated or foreign files are refused.

And the formats table around them: a model's format from its layout, its quantization's name."""

from pathlib import Path

import pytest
from gguf.constants import LlamaFileType

from localserve.formats import BadModelFile, detect, facts
from localserve.formats.gguf import quantization
from localserve.formats.gguf_header import BadGGUF, read_header
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


def test_quantization_is_named_from_the_file_type_not_llamas_description() -> None:
    # llama.cpp describes Q4_K_M as "Q4_K - Medium"; `show` and a loaded model both say Q4_K_M.
    assert quantization(int(LlamaFileType.MOSTLY_Q4_K_M)) == "Q4_K_M"
    assert quantization("3") == "Q4_1"  # llama.cpp's metadata reads back as text
    assert quantization(None) == "unknown"
    assert facts(SMOLLM2, "gguf").quantization == "Q4_1"


def test_formats_are_told_apart_by_their_layout(tmp_path: Path) -> None:
    folder = tmp_path / "model"
    folder.mkdir()
    assert detect(folder) is None
    (folder / "genai_config.json").write_text("{}")
    assert (fmt := detect(folder)) is not None and fmt.name == "onnx" and fmt.is_folder
    assert (fmt := detect(SMOLLM2)) is not None and fmt.name == "gguf"
    assert fmt.served_name(SMOLLM2) == SMOLLM2.stem


def test_an_unknown_format_is_a_clear_error() -> None:
    with pytest.raises(BadModelFile, match="unknown model format 'safetensors'"):
        facts(SMOLLM2, "safetensors")
