"""The store's and the admin endpoints' request bodies, declared once: a model named by `model`
(or Ollama's older `name`), a folder's path, and a load's placement."""

from __future__ import annotations

from localserve.ground.errors import BadRequest
from localserve.server.http import validation as v
from localserve.server.http.readers import model_name
from localserve.server.wire import shapes
from localserve.server.wire.declare import Body, Field, boolean, integer, text
from localserve.server.wire.fields import KEEP_ALIVE_FIELD, MODEL_OR_NAME, NAMED


def _path(body: v.JSON, key: str) -> str:
    path = v.string(body, key, required=True) or ""
    if "\0" in path:  # no file has one; the OS refuses it with a ValueError, not an OSError
        raise BadRequest("'path' must not contain a NUL character", key)
    return path


NAMED_MODEL = {
    "model": Field(MODEL_OR_NAME["model"], lambda body, _: model_name(body)),
    "name": Field(MODEL_OR_NAME["name"]),  # read with `model`
}
PATH = Field(shapes.STRING, _path)
NAME = Body("NameRequest", NAMED_MODEL, more=NAMED)
PULL = Body("PullRequest", {**NAMED_MODEL, "stream": boolean(True)}, more=NAMED)
IMPORT = Body(
    "ImportRequest",
    {
        "path": PATH,
        "model": text("default: from the file's name"),
        "copy": boolean(False),
    },
    ("path",),
)
SCAN = Body("ScanRequest", {"path": PATH}, ("path",))
LOAD = Body(
    "LoadRequest",
    {
        **NAMED_MODEL,
        "keep_alive": KEEP_ALIVE_FIELD,
        "device": text(examples=["cpu", "gpu0"]),
        "num_gpu": integer(-1, 1 << 20, -1),
        "pin": boolean(False),
    },
    more=NAMED,
)
PIN = Body("PinRequest", {**NAMED_MODEL, "pinned": boolean(True)}, more=NAMED)
BODIES = (NAME, PULL, IMPORT, SCAN, LOAD, PIN)
