"""Settings given per model name: the cap on its answers, the model that drafts for it, and
the names it also answers to."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from localserve.ground.errors import BadRequest, EngineError, LoadFailed
from localserve.ground.model import ModelRef
from localserve.ground.setting_kinds import for_model
from localserve.ground.settings import Settings
from localserve.store.resolve import canonical_name


def aliased(settings: Settings, name: str) -> str:
    """The model `name` stands for: the one an alias (settings' `alias`) names, or itself."""
    return (settings.alias or {}).get(canonical_name(name).lower(), name)


def output_cap(settings: Settings, model: str) -> int | None:
    """The cap `max_tokens` gives the answers of `model` (by its name), or None."""
    return for_model(settings.max_tokens, model)


def check_name(name: str, allow_path: bool) -> None:
    """BadRequest for a client's name that is a path: only the operator (`serve --model`, the
    admin load) may name a file; a name never holds a separator."""
    if not allow_path and ("/" in name or "\\" in name):
        raise BadRequest(
            f"'{name}' is not a model name: names hold no '/'; to serve a file, start the "
            "daemon with `localserve serve --model PATH` or import it into the store",
            "model",
        )


def with_draft(
    resolve: Callable[[str, bool], ModelRef], settings: Settings, name: str, allow_path: bool
) -> ModelRef:
    """The model `name` stands for, with the draft model `draft_model` names for it (blocking:
    the store may read manifests); refuses a draft that cannot be served or draft for it."""
    ref = resolve(name, allow_path)
    draft = (settings.draft_model or {}).get(ref.name.lower())
    if draft is None:
        return ref
    try:  # the operator named it: a path is as good as a name
        draft_ref = resolve(draft, True)
    except EngineError as exc:
        raise LoadFailed(
            f"the draft model '{draft}' of '{ref.name}' (--draft-model): {exc}"
        ) from exc
    if ref.format != "gguf" or draft_ref.format != "gguf":
        raise LoadFailed(
            f"'{ref.name}' cannot draft with '{draft}' (--draft-model): draft models are GGUF "
            "models of GGUF models"
        )
    return replace(ref, draft=replace(draft_ref, draft=None))
