"""What a model will take once loaded, by kind: the figure the manager reserves before a load.

Each format works it out from its own files (formats/gguf.py, formats/onnx.py); the manager adds
up `total` against its device's pool, so the LRU treats every format alike.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class MemoryEstimate:
    weights: int
    kv_cache: int
    compute: int
    # Host memory for slot contents saved after their slot went to another prompt
    # (engine/prompt_cache.py): filled as slots are reused, never past this.
    prompt_cache: int = 0

    @property
    def total(self) -> int:
        return self.weights + self.kv_cache + self.compute + self.prompt_cache

    def as_dict(self) -> dict[str, int]:
        return {**asdict(self), "total": self.total}
