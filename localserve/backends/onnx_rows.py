"""Continuous batching on the CPU: our own rows of KV cache over one onnxruntime session.

onnxruntime-genai 0.18 batches continuously only with a paged KV cache (CUDA, WebGPU); on the
CPU its Engine runs static batches, and its Generator cannot batch prompts of different
lengths. The decoders its builder exports need neither: their GroupQueryAttention reads each
row's length from the attention mask (the row's sum) and, when past and present are one
buffer, writes the row's new keys and values at that length. So one buffer per layer of
`max_rows` rows by `max_length` positions holds sequences of any lengths, and one decode steps
them all, each row's mask ones up to its own length:

- a request joins at the next step: its prompt is prefilled alone into a free row (a run of
  batch 1), which samples its first token, and the row then decodes with the others; one
  prompt a step, oldest first, so that a burst of requests holds the running rows back by one
  prefill at a time;
- prefilled rows are kept at the front, so a decode runs over exactly them: a row that ends is
  replaced by the last prefilled one, whose cells are copied into it;
- each row samples its own way from its logits (backends/onnx_sampling.py).

Only a decoder whose inputs and outputs are exactly those (`fits`) is run this way; any other
keeps onnxruntime-genai's Engine.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from localserve.backends.base import TurnEnd, TurnEvent
from localserve.backends.onnx_sampling import RowSampler
from localserve.ground.sampling import SamplingParams

_DTYPES = {"tensor(float)": np.float32, "tensor(float16)": np.float16}


def fits(genai: dict[str, Any]) -> str | None:
    """Why this genai_config.json's decoder cannot be run by rows; None when it can."""
    model = genai.get("model", {})
    decoder = model.get("decoder", {})
    inputs, outputs = decoder.get("inputs", {}), decoder.get("outputs", {})
    if set(model) & {"vision", "speech", "embedding", "encoder"} or "pipeline" in decoder:
        return "not a single decoder graph"
    if not genai.get("search", {}).get("past_present_share_buffer", False):
        return "its KV cache is not one buffer shared by past and present"
    if set(inputs) != {"input_ids", "attention_mask", "past_key_names", "past_value_names"}:
        return f"decoder inputs {sorted(inputs)}"
    if set(outputs) != {"logits", "present_key_names", "present_value_names"}:
        return f"decoder outputs {sorted(outputs)}"
    if not decoder.get("filename") or not decoder.get("num_hidden_layers"):
        return "no decoder file or layer count"
    return None


@dataclass
class _Row:
    key: int
    sampler: RowSampler
    max_new: int
    pending: list[int] | None  # the prompt, until its prefill
    length: int = 0  # cells written
    last: int = -1  # the token to decode next
    generated: int = 0
    done: bool = False  # ended here (its length); it runs as padding until released


class RowBatch:
    """The rows of one model's continuous batch, stepped by its batcher's engine thread."""

    def __init__(
        self,
        folder: Path,
        genai: dict[str, Any],
        max_rows: int,
        max_length: int,
        n_threads: int,
        eos_ids: frozenset[int],
    ) -> None:
        import onnxruntime as ort

        self._ort = ort
        decoder = genai["model"]["decoder"]
        options = ort.SessionOptions()
        # Threads that wait by sleeping, as onnxruntime-genai's sessions do: on a busy machine a
        # spinning thread that gets pre-empted stalls the step (8 rows: 63 ms against 32 ms).
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        # Ours, else the folder's own, else onnxruntime's default (every physical core).
        threads = n_threads or int(
            decoder.get("session_options", {}).get("intra_op_num_threads", 0)
        )
        if threads > 0:
            options.intra_op_num_threads = threads
        self.session = ort.InferenceSession(
            str(folder / decoder["filename"]), options, providers=["CPUExecutionProvider"]
        )
        names = decoder["inputs"], decoder["outputs"]
        n_layer = int(decoder["num_hidden_layers"])
        self._ids_name, self._mask_name = names[0]["input_ids"], names[0]["attention_mask"]
        self._logits_name = names[1]["logits"]
        self._past = [
            (names[0]["past_key_names"] % i, names[0]["past_value_names"] % i)
            for i in range(n_layer)
        ]
        self._present = [
            (names[1]["present_key_names"] % i, names[1]["present_value_names"] % i)
            for i in range(n_layer)
        ]
        graph_inputs = {i.name: i for i in self.session.get_inputs()}
        wanted = {self._ids_name, self._mask_name, *(n for pair in self._past for n in pair)}
        if set(graph_inputs) != wanted:
            raise ValueError(f"decoder graph inputs {sorted(set(graph_inputs) ^ wanted)} differ")
        first = graph_inputs[self._past[0][0]]
        self._kv_dtype = _DTYPES.get(first.type)
        if self._kv_dtype is None:
            raise ValueError(f"KV cache of type {first.type}")
        self._ids_dtype = (
            np.int32 if graph_inputs[self._ids_name].type.endswith("int32)") else np.int64
        )
        self._mask_dtype = (
            np.int32 if graph_inputs[self._mask_name].type.endswith("int32)") else np.int64
        )
        self._kv_shape = (max_rows, int(first.shape[1]), max_length, int(decoder["head_size"]))
        self.max_rows = max_rows
        self.max_length = max_length
        self.eos_ids = eos_ids
        self._buffers: list[tuple[np.ndarray, np.ndarray]] = []
        # OrtValues over views of the buffers, by (first row, rows): made once, reused per step.
        self._views: dict[tuple[int, int], list[tuple[Any, Any]]] = {}
        self.rows: list[_Row] = []

    def reset(self) -> None:
        """Forget every row; the buffers are made on first use (np.zeros maps pages lazily)."""
        self.rows.clear()
        if not self._buffers:
            self._buffers = [
                (np.zeros(self._kv_shape, self._kv_dtype), np.zeros(self._kv_shape, self._kv_dtype))
                for _ in self._past
            ]

    def begin(self, key: int, tokens: list[int], params: SamplingParams, max_new: int) -> None:
        if len(self.rows) >= self.max_rows:
            raise RuntimeError("every row is in use")
        if not tokens or len(tokens) >= self.max_length:
            raise ValueError(f"a prompt of {len(tokens)} tokens does not fit {self.max_length}")
        sampler = RowSampler(params, tokens, self.eos_ids, self.max_length)
        self.rows.append(_Row(key, sampler, max(1, max_new), list(tokens)))

    def release(self, key: int) -> None:
        """Free a row. A prefilled row's place is taken by the last prefilled row (its cells
        copied), so that prefilled rows stay a prefix of the rows and waiting prompts a suffix."""
        index = next((i for i, row in enumerate(self.rows) if row.key == key), None)
        if index is None:
            return
        if self.rows[index].pending is None:
            last = self._prefilled() - 1
            if index != last:
                moved = self.rows[last]
                for keys, values in self._buffers:
                    keys[index, :, : moved.length] = keys[last, :, : moved.length]
                    values[index, :, : moved.length] = values[last, :, : moved.length]
                self.rows[index] = moved
            index = last
        # Waiting prompts have no cells yet: they move down freely.
        self.rows.pop(index)

    def run(self) -> list[TurnEvent]:
        """Prefill the oldest waiting prompt, then decode every prefilled row once; one event
        per token. One prefill a step holds the running rows back by one prompt at most, and
        streams a burst of requests' first tokens one by one rather than all at the end."""
        events: list[TurnEvent] = []
        ready = self._prefilled()
        if ready < len(self.rows):
            row = self.rows[ready]
            assert row.pending is not None
            prompt, row.pending = row.pending, None
            logits = self._forward(ready, 1, np.asarray([prompt]), [len(prompt)])
            row.length = len(prompt)
            events.append(self._accept(row, logits[0, -1]))
            ready += 1
        rows = self.rows[:ready]
        if any(not row.done for row in rows):
            # A row ended here but not yet released rewrites its last cell: it grows no more.
            lengths = [row.length + (0 if row.done else 1) for row in rows]
            ids = np.asarray([[row.last] for row in rows])
            logits = self._forward(0, ready, ids, lengths)
            for row, length, row_logits in zip(rows, lengths, logits):
                if not row.done:
                    row.length = length
                    events.append(self._accept(row, row_logits[-1]))
        return events

    def _prefilled(self) -> int:
        """How many rows, from the first, have their prompt in the cache."""
        return next(
            (i for i, row in enumerate(self.rows) if row.pending is not None), len(self.rows)
        )

    def _accept(self, row: _Row, logits: np.ndarray) -> TurnEvent:
        token = row.sampler.pick(np.array(logits, dtype=np.float32))
        row.last = token
        row.generated += 1
        # The next decode writes one more cell: a full row cannot take it.
        if row.generated >= row.max_new or row.length + 1 >= self.max_length:
            row.done = True
            return TurnEvent(row.key, token, TurnEnd.LENGTH)
        return TurnEvent(row.key, token)

    def _forward(self, first: int, n: int, ids: np.ndarray, lengths: list[int]) -> np.ndarray:
        """One run over rows first..first+n-1: `ids` their new tokens (right-padded), `lengths`
        each row's length once they are written. Returns the logits (n, tokens, n_vocab)."""
        ids = np.ascontiguousarray(ids, dtype=self._ids_dtype)
        mask = np.zeros((n, max(lengths)), dtype=self._mask_dtype)
        for i, length in enumerate(lengths):
            mask[i, :length] = 1
        binding = self.session.io_binding()
        # The arrays must outlive the run: the binding holds no reference to them.
        binding.bind_cpu_input(self._ids_name, ids)
        binding.bind_cpu_input(self._mask_name, mask)
        # Outputs come back in the order they were bound: the logits first.
        binding.bind_output(self._logits_name)
        for (past_k, past_v), (present_k, present_v), (k, v) in zip(
            self._past, self._present, self._views_of(first, n)
        ):
            # Past and present are the same memory: the graph writes the new cells in place.
            binding.bind_ortvalue_input(past_k, k)
            binding.bind_ortvalue_input(past_v, v)
            binding.bind_ortvalue_output(present_k, k)
            binding.bind_ortvalue_output(present_v, v)
        self.session.run_with_iobinding(binding)
        logits: np.ndarray = binding.get_outputs()[0].numpy()
        return logits

    def _views_of(self, first: int, n: int) -> list[tuple[Any, Any]]:
        views = self._views.get((first, n))
        if views is None:
            # Leading-axis slices of a C-ordered buffer are contiguous: no copy is made.
            make = self._ort.OrtValue.ortvalue_from_numpy
            views = [
                (make(k[first : first + n]), make(v[first : first + n])) for k, v in self._buffers
            ]
            self._views[(first, n)] = views
        return views
