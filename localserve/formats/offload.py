"""A model's memory split by layer: what stays on the host and what a device holds when `n` of
its layers are offloaded to it, the way llama.cpp 0.3.36 splits a GGUF.

- The input embeddings stay on the CPU always (there is little to gain from offloading a lookup).
- `n_gpu_layers = n` offloads the output layer (final norm and head) first, then the last
  `n - 1` repeating layers, each with its weights and its KV cache; `layers + 1` offloads all.
  A head tied to the embeddings is loaded as a copy on the device.
- A device takes no tensor larger than it can address in one buffer (Vulkan's
  maxStorageBufferRange: 128 MiB on lavapipe): a larger head, or a micro-batch of logits larger
  than that, keeps the output layer on the host.
- Host weights are mapped from the file: llama.cpp maps the span from the first to the last
  tensor that stays on the host, offloaded tensors inside it included, and reports that span.
- Compute: where the output layer runs, the larger of a micro-batch's logits and its widest
  layer's activations, plus its inputs; a device without the output, the activations (llama.cpp
  also runs the host layers' large matrix products there); the host, with any layer offloaded,
  the inputs and the attention mask.
"""

from __future__ import annotations

from dataclasses import dataclass

from localserve.formats.memory import MemoryEstimate, sum_estimates

INPUT = -1  # the layer index of the input embeddings in `tensors`


@dataclass(frozen=True)
class LayerSplit:
    """Where a model's memory goes with `layers` of its layers offloaded (0: none)."""

    layers: int
    host: MemoryEstimate
    device: MemoryEstimate
    output_on_device: bool = False


@dataclass(frozen=True)
class LayeredEstimate:
    """A model's estimate in the parts that move between devices."""

    input_weights: int  # stays on the host
    output_weights: int  # the head, with the final norm
    layer_weights: tuple[int, ...]
    layer_kv: tuple[int, ...]
    compute_layer: int  # one layer's activations for a micro-batch
    compute_logits: int  # a micro-batch of logits
    compute_input: int  # a micro-batch's inputs (embeddings, positions)
    output_buffer: int  # the logits kept between steps, in host memory
    prompt_cache: int  # host memory
    embedding_output: int = 0  # host memory the output buffer grows by to embed
    # A head tied to the embeddings is the host's embedding matrix: a device needs a copy.
    output_copy: int = 0
    output_largest: int = 0  # the output layer's largest tensor (the copy included)
    compute_mask: int = 0  # the attention mask, on the host when layers are offloaded
    host_kv: int = 0  # a cache that never moves (an ONNX model's)
    # A draft model that loads with this one (settings' draft_model): all on the device when
    # this one is, else all on the host.
    draft: LayeredEstimate | None = None
    # (layer, file offset, bytes) of every tensor, for the mapped span; INPUT for the input
    # embeddings, n_layers for the output layer. Empty: weights are counted, not spanned.
    tensors: tuple[tuple[int, int, int], ...] = ()
    # The context per slot this estimate sizes (0: not a slot count's, an ONNX model's).
    n_ctx_slot: int = 0

    @property
    def n_layers(self) -> int:
        return len(self.layer_weights)

    @property
    def max_layers(self) -> int:
        """The layer count that offloads everything: the repeating layers and the output."""
        return self.n_layers + 1 if self.n_layers else 0

    @property
    def whole(self) -> MemoryEstimate:
        """The model all on the host (what a CPU-only load takes)."""
        return self.split(0).host

    def split(self, layers: int, max_tensor: int | None = None) -> LayerSplit:
        """The shares with `layers` offloaded to a device whose largest tensor is `max_tensor`
        bytes (None: no limit)."""
        layers = max(0, min(layers, self.max_layers))
        first = self.n_layers - max(0, layers - 1)  # the first repeating layer on the device
        fits = max_tensor is None or max(self.output_largest, self.compute_logits) <= max_tensor
        output_on_device = layers > 0 and fits
        host_weights = self._host_weights(first, output_on_device)
        logits_here = max(self.compute_logits, self.compute_layer) + self.compute_input
        if not layers:
            host_compute = logits_here
        elif output_on_device:
            host_compute = self.compute_input + self.compute_mask
        else:
            host_compute = logits_here + self.compute_mask
        host = MemoryEstimate(
            weights=host_weights,
            kv_cache=self.host_kv + sum(self.layer_kv[:first]),
            compute=host_compute + self.output_buffer,
            prompt_cache=self.prompt_cache,
            embedding_output=self.embedding_output,
        )
        device = MemoryEstimate(
            weights=sum(self.layer_weights[first:])
            + (self.output_weights + self.output_copy if output_on_device else 0),
            kv_cache=sum(self.layer_kv[first:]),
            compute=(logits_here if output_on_device else self.compute_layer) if layers else 0,
        )
        if self.draft is not None:
            d = self.draft
            whole = layers > 0 and layers == self.max_layers
            draft = d.split(d.max_layers if whole else 0, max_tensor)
            host = sum_estimates([host, draft.host])
            device = sum_estimates([device, draft.device])
        return LayerSplit(layers, host, device, output_on_device)

    def _host_weights(self, first: int, output_on_device: bool) -> int:
        def on_host(layer: int) -> bool:
            if layer == self.n_layers:
                return not output_on_device
            return layer < first  # INPUT is -1: always

        if not self.tensors:
            return (
                self.input_weights
                + sum(self.layer_weights[:first])
                + (0 if output_on_device else self.output_weights)
            )
        spans = [(offset, offset + size) for layer, offset, size in self.tensors if on_host(layer)]
        return max(end for _, end in spans) - min(start for start, _ in spans) if spans else 0


def unsplit(estimate: MemoryEstimate) -> LayeredEstimate:
    """A model that runs where it is placed, whole (an ONNX model): nothing to offload."""
    return LayeredEstimate(
        input_weights=estimate.weights,
        output_weights=0,
        layer_weights=(),
        layer_kv=(),
        compute_layer=estimate.compute,
        compute_logits=0,
        compute_input=0,
        output_buffer=0,
        prompt_cache=estimate.prompt_cache,
        host_kv=estimate.kv_cache,
    )
