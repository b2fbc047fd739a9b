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
    PENALTIES,
    PRIORITY,
    STOP,
    TOKEN_IDS,
)
from localserve.server.wire.shapes import (
    STRING,
    Schema,
    array,
    boolean,
    integer,
    nullable,
    number,
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
    "InfillRequest": obj(
        {
            "model": text("the first loaded model when blank"),
            "input_prefix": STRING,
            "input_suffix": STRING,
            "prompt": text("text after the prefix"),
            "priority": PRIORITY,
            "input_extra": nullable(array(obj({"filename": text(), "text": STRING}, ("text",)))),
            "n_predict": integer(-1, 1 << 30, -1, "0: only prefill"),
            "n_indent": integer(0, 1 << 20, 0),
            "t_max_predict_ms": integer(-1, 1 << 40, -1),
            "t_max_prompt_ms": integer(-1, 1 << 40, -1),
            "cache_prompt": boolean(True),
            "temperature": number(0, 10, 0.8),
            "top_k": integer(0, 1 << 20, 40),
            "top_p": number(0, 1, 0.95),
            "min_p": number(0, 1, 0.05),
            "repeat_penalty": number(0, 10, 1),
            **PENALTIES,
            "repeat_last_n": integer(-1, 1 << 20, 64),
            "seed": integer(-1, (1 << 32) - 1, -1),
            "stop": STOP,
            "ignore_eos": boolean(False),
            "samplers": one_of(
                {"type": "string", "pattern": "^[ekpmitdysxEKPMITDYSX]*$"},
                array(
                    {
                        "enum": [
                            "penalties",
                            "top_k",
                            "top_p",
                            "min_p",
                            "infill",
                            "temperature",
                            "dry",
                            "typ_p",
                            "top_n_sigma",
                            "xtc",
                        ]
                    }
                ),
                {"type": "null"},
                description="in the order penalties, top_k, top_p, min_p, infill, temperature",
            ),
            "response_fields": nullable(array(STRING)),
            "stream": boolean(False),
            "keep_alive": KEEP_ALIVE,
        },
        ("input_prefix", "input_suffix"),
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
