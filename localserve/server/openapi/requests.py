"""The JSON Schemas of /openapi.json (openapi/document.py): each request body as its handler reads
it (the types and ranges server/http/validation.py checks, the fields it requires) and each answer.

Every optional field also takes JSON null, which the readers treat as not given. Unknown fields
are ignored by the handlers, so no object here forbids more properties.
"""

from __future__ import annotations

from localserve.server.wire.fields import (
    KEEP_ALIVE,
    MESSAGE,
    MODEL,
    MODEL_OR_NAME,
    NAMED,
    TOKEN_IDS,
)
from localserve.server.wire.shapes import (
    STRING,
    Schema,
    array,
    boolean,
    integer,
    nullable,
    obj,
    one_of,
    text,
)

# -- requests ----------------------------------------------------------------------------------

REQUESTS: dict[str, Schema] = {
    "Message": MESSAGE,
    "OpenAIEmbeddingRequest": obj(
        {
            "model": MODEL,
            "input": one_of(
                STRING, array(STRING, minItems=1), TOKEN_IDS, array(TOKEN_IDS, minItems=1)
            ),
            "encoding_format": nullable({"enum": ["float", "base64"]}),
            "dimensions": integer(1, 1 << 20),
        },
        ("model", "input"),
    ),
    "EmbedRequest": obj(
        {
            "model": MODEL,
            "input": one_of(STRING, array(STRING)),
            "truncate": boolean(True),
            "dimensions": integer(1, 1 << 20),
            "options": nullable(obj({"num_ctx": integer(1, 1 << 31)})),
            "keep_alive": KEEP_ALIVE,
        },
        ("model",),
    ),
    "EmbeddingsRequest": obj(
        {"model": MODEL, "prompt": text("empty: only load the model"), "keep_alive": KEEP_ALIVE},
        ("model",),
    ),
    "NameRequest": obj(MODEL_OR_NAME, **NAMED),
    "PullRequest": obj({**MODEL_OR_NAME, "stream": boolean(True)}, **NAMED),
    "ImportRequest": obj(
        {"path": STRING, "model": text("default: from the file's name"), "copy": boolean(False)},
        ("path",),
    ),
    "ScanRequest": obj({"path": STRING}, ("path",)),
    "LoadRequest": obj(
        {
            **MODEL_OR_NAME,
            "keep_alive": KEEP_ALIVE,
            "device": text(examples=["cpu", "gpu0"]),
            "num_gpu": integer(-1, 1 << 20, -1),
            "pin": boolean(False),
        },
        **NAMED,
    ),
    "PinRequest": obj({**MODEL_OR_NAME, "pinned": boolean(True)}, **NAMED),
}
