"""What a model will take once loaded, by kind: the figure the manager reserves before a load.

Each format works it out from its own files (formats/gguf.py, formats/onnx.py); the manager adds
up `total` against its device's pool, so the LRU treats every format alike.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class MemoryEstimate:
    weights: int
    kv_cache: int
    compute: int
    # Host memory for slot contents saved after their slot went to another prompt
    # (engine/batching/prompt_cache.py): filled as slots are reused, never past this.
    prompt_cache: int = 0
    # What llama.cpp's output buffer grows by at the first embedding step (formats/gguf.py):
    # like the prompt cache, reserved from the start and allocated only later.
    embedding_output: int = 0

    @property
    def total(self) -> int:
        return (
            self.weights + self.kv_cache + self.compute + self.prompt_cache + self.embedding_output
        )

    @property
    def at_load(self) -> int:
        """What the runtime allocates at the load: the total less what fills later."""
        return self.total - self.prompt_cache - self.embedding_output

    def as_dict(self) -> dict[str, int]:
        return {**asdict(self), "total": self.total}


def sum_estimates(parts: Iterable[MemoryEstimate]) -> MemoryEstimate:
    """A model's estimate over every device it touches."""
    parts = list(parts)
    return MemoryEstimate(
        weights=sum(p.weights for p in parts),
        kv_cache=sum(p.kv_cache for p in parts),
        compute=sum(p.compute for p in parts),
        prompt_cache=sum(p.prompt_cache for p in parts),
        embedding_output=sum(p.embedding_output for p in parts),
    )
