"""An upstream's GET /v1/models answer, read as the probe reads it: whatever the upstream sends.

The answer is foreign input, fetched every few seconds for as long as the daemon runs, and one
probe loop serves every upstream: reading it never raises, whatever shape or types it has (an
entry with no `id`, a `created` that is text, a `data` that is no list). What is not usable is
left out or replaced by what is known; the bytes read are bounded by LISTING_LIMIT.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, TypeGuard

# Far more than a listing needs (OpenRouter's 300-odd models take about 1 MiB), and little
# enough that a probe every few seconds holds no great buffer.
LISTING_LIMIT = 4 << 20
# The last second datetime can show (9999-12-31): every listing turns `created` into a date.
_LAST_SECOND = 253_402_300_799


class ListingTooLarge(ValueError):
    """An upstream's model list longer than LISTING_LIMIT: a failed probe that says so."""

    def __init__(self, size: int | None = None) -> None:
        told = f" ({size} bytes)" if size is not None else ""
        super().__init__(
            f"its model list{told} is over the {LISTING_LIMIT >> 20} MiB a listing may take"
        )


@dataclass(frozen=True)
class RemoteModel:
    id: str  # the upstream's own name for it, sent in `model`
    context_length: int | None = None
    created: int = 0


def read_listing(body: Any, seen: Mapping[str, int], now: int) -> dict[str, RemoteModel]:
    """The models of a /v1/models answer, by id. An entry with no text `id` is skipped; where
    `created` is no usable time (llama.cpp's server gives none), it is when this daemon first
    saw the model (`seen`), else `now`."""
    data = body.get("data") if isinstance(body, dict) else None
    if not isinstance(data, list):
        return {}
    models: dict[str, RemoteModel] = {}
    for entry in data:
        if not isinstance(entry, dict) or not isinstance(entry.get("id"), str) or not entry["id"]:
            continue
        model_id = entry["id"]
        created = _timestamp(entry.get("created")) or seen.get(model_id) or now
        models[model_id] = RemoteModel(model_id, context_length(entry), created)
    return models


def context_length(entry: dict[str, Any]) -> int | None:
    """Where each server reports a model's context: vLLM and SGLang `max_model_len`, others
    `context_length` or `context_window`, llama.cpp's server `meta.n_ctx_train`."""
    meta = entry.get("meta") if isinstance(entry.get("meta"), dict) else {}
    for value in (
        entry.get("max_model_len"),
        entry.get("context_length"),
        entry.get("context_window"),
        meta.get("n_ctx_train") if meta else None,
    ):
        if _whole(value) and value > 0:
            return value
    return None


def _timestamp(value: object) -> int | None:
    """Seconds since 1970 that a date can show, from an integer or a finite float; else None."""
    if isinstance(value, float) and math.isfinite(value):
        value = int(value)
    if _whole(value) and 0 < value <= _LAST_SECOND:
        return value
    return None


def _whole(value: object) -> TypeGuard[int]:
    """An integer, and not True or False (bool is int's subclass)."""
    return isinstance(value, int) and not isinstance(value, bool)
