"""The one error a model format raises: this file or folder is not a model we can serve.

It lives below the store and the engine so that both raise and catch the same class: the store
refuses such a model at import or pull, the loader turns it into a failed load.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from localserve.ground.errors import LoadFailed


class BadModelFile(ValueError):
    """A file or folder that is not a model we can serve, and why."""


@contextmanager
def refused_as_load_failure(name: str) -> Iterator[None]:
    """A model file the format refuses fails the load (or its estimate): the runtime never
    sees it."""
    try:
        yield
    except BadModelFile as exc:
        raise LoadFailed(f"cannot load '{name}': {exc}") from None
