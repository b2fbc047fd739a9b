"""Reading a GGUF file's header: metadata and tensor table, checked against the file's size.

A truncated or malformed file must be refused here, with a clear message, before llama.cpp
ever sees it. We parse the header ourselves, skipping array contents, because gguf's own
reader walks every vocabulary string in Python and would make a cold load slower.
"""

from __future__ import annotations

import functools
import mmap
import os
import struct
from dataclasses import dataclass, field
from typing import Any

from gguf.constants import GGML_QUANT_SIZES, GGMLQuantizationType

MAGIC = b"GGUF"
# GGUF value types: https://github.com/ggml-org/ggml/blob/master/docs/gguf.md
_SCALARS = {
    0: "<B",
    1: "<b",
    2: "<H",
    3: "<h",
    4: "<I",
    5: "<i",
    6: "<f",
    7: "<?",
    10: "<Q",
    11: "<q",
    12: "<d",
}
_STRING, _ARRAY = 8, 9
_U64 = struct.Struct("<Q")
_MAX_DIMS = 8


class BadGGUF(ValueError):
    """The file is not a GGUF model llama.cpp could load safely."""


@dataclass(frozen=True)
class TensorInfo:
    name: str
    ggml_type: int
    n_elements: int
    n_bytes: int
    offset: int


@dataclass
class GGUFHeader:
    """What a GGUF file says about itself; array values are kept as their length only."""

    path: str
    version: int
    metadata: dict[str, Any] = field(default_factory=dict)
    array_lengths: dict[str, int] = field(default_factory=dict)
    # Where each array's contents lie in the file (start, end): a few are searched later
    # (`find_strings`, `string_at`) without parsing every element now.
    array_spans: dict[str, tuple[int, int]] = field(default_factory=dict)
    tensors: list[TensorInfo] = field(default_factory=list)

    @property
    def architecture(self) -> str:
        return str(self.metadata.get("general.architecture", "unknown"))

    def arch_value(self, key: str, default: Any = None) -> Any:
        return self.metadata.get(f"{self.architecture}.{key}", default)

    @property
    def weights_bytes(self) -> int:
        return sum(t.n_bytes for t in self.tensors)


class _Reader:
    """A cursor over the mapped file; unpack_from on the map avoids a syscall per field."""

    def __init__(self, data: mmap.mmap, size: int) -> None:
        self.data, self.size, self.pos = data, size, 0

    def take(self, n: int) -> bytes:
        end = self.pos + n
        if end > self.size:
            raise BadGGUF("the file ends inside its header: it is truncated")
        chunk = self.data[self.pos : end]
        self.pos = end
        return chunk

    def unpack(self, fmt: str) -> Any:
        n = struct.calcsize(fmt)
        if self.pos + n > self.size:
            raise BadGGUF("the file ends inside its header: it is truncated")
        value = struct.unpack_from(fmt, self.data, self.pos)[0]
        self.pos += n
        return value

    def string(self) -> str:
        n = self.unpack("<Q")
        if n > self.size:
            raise BadGGUF("a string length in the header is larger than the file")
        return self.take(n).decode("utf-8", errors="replace")

    def skip(self, n: int) -> None:
        if self.pos + n > self.size:
            raise BadGGUF("the file ends inside its header: it is truncated")
        self.pos += n

    def value(self, vtype: int) -> Any:
        if vtype in _SCALARS:
            return self.unpack(_SCALARS[vtype])
        if vtype == _STRING:
            return self.string()
        raise BadGGUF(f"unknown metadata value type {vtype}")

    def skip_array(self, vtype: int, count: int) -> None:
        if vtype in _SCALARS:
            self.skip(count * struct.calcsize(_SCALARS[vtype]))
        elif vtype == _STRING:
            # A vocabulary is ~50k-260k strings: this loop is the hot part of reading a header.
            data, pos, size, unpack_from = self.data, self.pos, self.size, _U64.unpack_from
            for _ in range(count):
                if pos + 8 > size:
                    raise BadGGUF("the file ends inside its header: it is truncated")
                pos += 8 + unpack_from(data, pos)[0]
            if pos > size:
                raise BadGGUF("the file ends inside its header: it is truncated")
            self.pos = pos
        else:
            raise BadGGUF(f"unsupported array element type {vtype}")


def read_header(path: str) -> GGUFHeader:
    """Parse and bounds-check a GGUF file; raise BadGGUF with the reason if it is unsafe.

    A file unchanged since its last read (same size and mtime) is not parsed again: a model
    evicted and loaded back pays only for llama.cpp's own load.
    """
    st = os.stat(path)
    return _read_header_cached(path, st.st_size, st.st_mtime_ns)


@functools.lru_cache(maxsize=64)
def _read_header_cached(path: str, size: int, mtime_ns: int) -> GGUFHeader:
    return _read_header(path)


def _read_header(path: str) -> GGUFHeader:
    size = os.path.getsize(path)
    if size < 24:
        raise BadGGUF(f"the file is {size} bytes: too small to be a GGUF model")
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as data:
        r = _Reader(data, size)
        if r.take(4) != MAGIC:
            raise BadGGUF("not a GGUF file (bad magic)")
        version = r.unpack("<I")
        if version not in (2, 3):
            raise BadGGUF(f"unsupported GGUF version {version}")
        n_tensors, n_kv = r.unpack("<Q"), r.unpack("<Q")
        if n_tensors > size or n_kv > size:
            raise BadGGUF("the header's counts are larger than the file")
        header = GGUFHeader(path, version)
        for _ in range(n_kv):
            key, vtype = r.string(), r.unpack("<I")
            if vtype == _ARRAY:
                etype, count = r.unpack("<I"), r.unpack("<Q")
                header.array_lengths[key] = count
                start = r.pos
                r.skip_array(etype, count)
                header.array_spans[key] = (start, r.pos)
            else:
                header.metadata[key] = r.value(vtype)
        for _ in range(n_tensors):
            header.tensors.append(_tensor_info(r))
        alignment = int(header.metadata.get("general.alignment", 32))
        start = -(-r.pos // alignment) * alignment
    for t in header.tensors:
        if start + t.offset + t.n_bytes > size:
            raise BadGGUF(
                f"tensor '{t.name}' lies past the end of the file ({size} bytes): "
                "the file is truncated"
            )
    return header


def _tensor_info(r: _Reader) -> TensorInfo:
    name = r.string()
    n_dims = r.unpack("<I")
    if n_dims > _MAX_DIMS:
        raise BadGGUF(f"tensor '{name}' claims {n_dims} dimensions")
    n_elements = 1
    for _ in range(n_dims):
        n_elements *= r.unpack("<Q")
    ggml_type, offset = r.unpack("<I"), r.unpack("<Q")
    try:
        block, type_size = GGML_QUANT_SIZES[GGMLQuantizationType(ggml_type)]
    except (ValueError, KeyError):
        raise BadGGUF(f"tensor '{name}' has unknown type {ggml_type}") from None
    if n_elements % block:
        raise BadGGUF(f"tensor '{name}' has {n_elements} elements, not a multiple of {block}")
    return TensorInfo(name, ggml_type, n_elements, n_elements // block * type_size, offset)


# -- strings inside an array, read on demand -------------------------------------------------------


def find_strings(header: GGUFHeader, key: str, texts: tuple[str, ...]) -> set[str]:
    """Which of `texts` are elements of the string array `key` (a vocabulary: a few known
    token texts), found in the file without decoding the array's other strings."""
    span = header.array_spans.get(key)
    if span is None:
        return set()
    with open(header.path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as data:
        # An element is its u64 length and its bytes: searching for both keeps a text from
        # matching inside a longer token.
        return {t for t in texts if data.find(_U64.pack(len(t.encode())) + t.encode(), *span) >= 0}


def string_at(header: GGUFHeader, key: str, index: int) -> str | None:
    """Element `index` of the string array `key` (a token's text by id), or None."""
    span = header.array_spans.get(key)
    if span is None or not 0 <= index < header.array_lengths.get(key, 0):
        return None
    with open(header.path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as data:
        pos, end = span
        for _ in range(index):
            pos += 8 + _U64.unpack_from(data, pos)[0]
        n = _U64.unpack_from(data, pos)[0]
        if pos + 8 + n > end:
            return None
        return data[pos + 8 : pos + 8 + n].decode("utf-8", errors="replace")
