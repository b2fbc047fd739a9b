"""What the daemon and a device's engine worker say to each other over their socket.

One frame is a 4-byte big-endian length and a msgpack body (msgspec: typed, and about ten times
faster than pickling dicts). The daemon asks (load, tokenize, submit, embed, cancel, unload,
stats); the worker answers each ask that wants an answer with a `Reply` carrying the ask's
`ref`, and sends one `Step` per engine step with every sequence's new text, tokens, finish and
usage, so a step's output costs one message however many streams it serves.
"""

from __future__ import annotations

import socket
import struct
from typing import Any, TypeVar

import msgspec

from localserve.ground.model import ModelInfo, ModelRef
from localserve.ground.sampling import SamplingParams

# The name the load probe loads its model under: a worker's test faults that act as a served
# model's steps would (engine/worker_process/faults.py) leave its steps alone.
PROBE_MODEL = "probe"


class Load(msgspec.Struct, tag=True):
    ref: int
    model: ModelRef
    # The model's share of its reservation kept for saved slot contents (0: none).
    prompt_cache_bytes: int
    # llama.cpp's extra buffer types (AMX, repacked weights): off where the probe saw them die.
    use_extra_bufts: bool = True
    # Layers offloaded to `device` (ggml's name for it, "Vulkan0"); None and 0: the CPU only.
    gpu_layers: int = 0
    device: str | None = None
    # The context per slot the daemon sized and reserved (0: the settings' ctx).
    n_ctx_slot: int = 0


class Loaded(msgspec.Struct, tag=True):
    info: ModelInfo
    n_vocab: int
    # What the runtime says it allocated, and the worker's RSS growth over the load.
    actual_bytes: int
    rss_delta: int
    load_seconds: float
    # The runtime's buffers by name ("vulkan0 model", "cpu_mapped model"), in bytes.
    buffers: dict[str, int] = {}


class Unload(msgspec.Struct, tag=True):
    ref: int
    model: str


class Tokenize(msgspec.Struct, tag=True):
    ref: int
    model: str
    texts: list[str]
    add_special: bool


class Submit(msgspec.Struct, tag=True):
    """A generation: the worker tokenizes `text` (unless `prompt` holds its tokens), caps the
    answer at what the slot's context leaves, and queues it, or refuses it at once (an empty
    prompt, the context, the queue bound): one round trip before the first step."""

    ref: int
    model: str
    seq: int
    params: SamplingParams  # its max_tokens already the request's or the settings' cap
    prompt_field: str
    prompt: list[int] = []
    text: str = ""
    add_special: bool = False  # tokenizing `text`: add the model's BOS
    want_tokens: bool = False  # answer with the tokens of `text`, not only their count


class Submitted(msgspec.Struct):
    """A Submit's answer: the prompt's length, and its tokens when they were asked for."""

    prompt_tokens: int
    tokens: list[int] = []


class Embed(msgspec.Struct, tag=True):
    ref: int
    model: str
    job: int
    inputs: list[list[int]]
    background: bool = False


class Cancel(msgspec.Struct, tag=True):
    """A client left: a sequence (`seq`) or an embeddings job (`job`) of a model."""

    model: str
    seq: int = 0
    job: int = 0


class Stats(msgspec.Struct, tag=True):
    ref: int


class Failure(msgspec.Struct):
    """An error raised in the worker, by kind (the class name in ground/errors.py) and message,
    with the attributes the error mapping needs (param, token counts)."""

    kind: str
    message: str
    param: str | None = None
    extra: dict[str, Any] = {}


class Reply(msgspec.Struct, tag=True):
    ref: int
    value: Any = None
    error: Failure | None = None


class Output(msgspec.Struct, array_like=True):
    """One sequence's share of a step."""

    seq: int
    text: str
    tokens: list[int]
    finish_reason: str | None = None
    error: str | None = None
    cached_tokens: int = 0
    queued_s: float = 0.0  # how long it waited for a slot
    stop_sequence: str | None = None  # the stop string that ended it


class ModelLoad(msgspec.Struct, array_like=True):
    """A model's batcher after a step: what waits and runs, and its prompt cache, for /api/ps."""

    waiting: int
    running: int
    busy: int
    prompt_cache: dict[str, Any] | None = None
    # Draft tokens verified and accepted so far (engine/batching/drafts.py); None: none drafts.
    speculation: dict[str, int] | None = None
    # Background sequences that yielded their slot to interactive ones (priorities.py).
    preemptions: int = 0


class Step(msgspec.Struct, tag=True):
    """One step of one model's batcher."""

    model: str
    outputs: list[Output]
    load: ModelLoad


class Embedded(msgspec.Struct, tag=True):
    model: str
    job: int
    # float32 rows, one per input, in order; empty with an error.
    vectors: list[bytes] = []
    error: str | None = None


ToWorker = Load | Unload | Tokenize | Submit | Embed | Cancel | Stats
FromWorker = Reply | Step | Embedded

T = TypeVar("T")

_LENGTH = struct.Struct(">I")


def frame(message: msgspec.Struct, encoder: msgspec.msgpack.Encoder) -> bytearray:
    """The message behind its length, encoded in place: a prompt of megabytes is copied once."""
    data = bytearray(_LENGTH.size)
    encoder.encode_into(message, data, _LENGTH.size)
    _LENGTH.pack_into(data, 0, len(data) - _LENGTH.size)
    return data


def read_frame(sock: socket.socket, decoder: msgspec.msgpack.Decoder[T]) -> T | None:
    """The next message on `sock`; None once the other end has closed it."""
    header = _read_exactly(sock, _LENGTH.size)
    if header is None:
        return None
    body = _read_exactly(sock, int(_LENGTH.unpack(header)[0]))
    return None if body is None else decoder.decode(body)


def _read_exactly(sock: socket.socket, n: int) -> bytes | None:
    chunks, left = [], n
    while left:
        chunk = sock.recv(min(left, 1 << 20))
        if not chunk:
            return None
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)
