"""The one error a model format raises: this file or folder is not a model we can serve.

It lives below the store and the engine so that both raise and catch the same class: the store
refuses such a model at import or pull, the loader turns it into a failed load.
"""

from __future__ import annotations


class BadModelFile(ValueError):
    """A file or folder that is not a model we can serve, and why."""
