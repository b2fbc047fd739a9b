"""OpenAI's Batch API in /openapi.json: /v1/files and /v1/batches (server/batches/), their
schemas and their operations. The operations are built with document.py's `op`, handed in, so
that this module stays below the document that lists it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from localserve.server.wire.shapes import (
    INT,
    NAT,
    NULL,
    STRING,
    Schema,
    array,
    fixed,
    nullable,
    obj,
    one_of,
    ref,
)

FILE = fixed(
    {
        "id": STRING,
        "object": {"const": "file"},
        "bytes": NAT,
        "created_at": INT,
        "filename": STRING,
        "purpose": {"enum": ["batch", "batch_output"]},
        "expires_at": nullable(INT),
        "status": {"const": "processed"},
        "status_details": NULL,
    }
)
_TIMES = ("in_progress", "finalizing", "completed", "failed", "expired", "cancelling", "cancelled")
BATCH = fixed(
    {
        "id": STRING,
        "object": {"const": "batch"},
        "endpoint": STRING,
        "errors": one_of(
            NULL,
            fixed(
                {
                    "object": {"const": "list"},
                    "data": array(obj({"code": STRING, "message": STRING})),
                }
            ),
        ),
        "input_file_id": STRING,
        "completion_window": STRING,
        "status": {
            "enum": [
                "validating",
                "in_progress",
                "finalizing",
                "completed",
                "failed",
                "expired",
                "cancelling",
                "cancelled",
            ]
        },
        "output_file_id": nullable(STRING),
        "error_file_id": nullable(STRING),
        "created_at": INT,
        "expires_at": INT,
        **{f"{t}_at": nullable(INT) for t in _TIMES},
        "request_counts": fixed({"total": NAT, "completed": NAT, "failed": NAT}),
        "metadata": nullable(obj({}, additionalProperties=STRING)),
    }
)


def _list(item: str) -> Schema:
    return fixed(
        {
            "object": {"const": "list"},
            "data": array(ref(item)),
            "first_id": nullable(STRING),
            "last_id": nullable(STRING),
            "has_more": {"type": "boolean"},
        }
    )


BATCH_SCHEMAS: dict[str, Schema] = {
    "File": FILE,
    "FileList": _list("File"),
    "FileDeleted": fixed({"id": STRING, "object": {"const": "file"}, "deleted": {"const": True}}),
    "Batch": BATCH,
    "BatchList": _list("Batch"),
}

_UPLOAD = {
    "required": True,
    "content": {
        "multipart/form-data": {
            "schema": obj(
                {
                    "file": {"type": "string", "format": "binary"},
                    "purpose": {"const": "batch"},
                },
                ("file", "purpose"),
            )
        }
    },
}


def _query(name: str, schema: Schema) -> dict[str, Any]:
    return {"name": name, "in": "query", "required": False, "schema": schema}


def _path(name: str) -> dict[str, Any]:
    return {"name": name, "in": "path", "required": True, "schema": STRING}


_PAGE = [_query("limit", {"type": "integer", "minimum": 1}), _query("after", STRING)]


def batch_paths(op: Callable[..., dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """The operations; `op(summary, tag, answer, body, errors, media_type=...)` is
    document.py's."""
    tag = "batches"
    file_id, batch_id = [_path("file_id")], [_path("batch_id")]
    return {
        "/v1/files": {
            "post": {
                **op(
                    "upload a batch's input: JSONL, purpose batch",
                    tag,
                    "File",
                    None,
                    (400, 408, 413),
                ),
                "requestBody": _UPLOAD,
            },
            "get": {
                **op("the stored files, newest first", tag, "FileList", None, (400,)),
                "parameters": [
                    *_PAGE,
                    _query("purpose", STRING),
                    _query("order", {"enum": ["asc", "desc"]}),
                ],
            },
        },
        "/v1/files/{file_id}": {
            "get": {**op("one file", tag, "File", None, (404,)), "parameters": file_id},
            "delete": {
                **op("delete a file", tag, "FileDeleted", None, (400, 404)),
                "parameters": file_id,
            },
        },
        "/v1/files/{file_id}/content": {
            "get": {
                **op(
                    "a file's lines",
                    tag,
                    {"type": "string"},
                    None,
                    (404,),
                    media_type="application/jsonl",
                ),
                "parameters": file_id,
            }
        },
        "/v1/batches": {
            "post": op(
                "run a file's requests at background priority",
                tag,
                "Batch",
                "BatchRequest",
                (400, 404, 408, 413),
            ),
            "get": {
                **op("the batches, newest first", tag, "BatchList", None, (400,)),
                "parameters": _PAGE,
            },
        },
        "/v1/batches/{batch_id}": {
            "get": {**op("one batch", tag, "Batch", None, (404,)), "parameters": batch_id}
        },
        "/v1/batches/{batch_id}/cancel": {
            "post": {
                **op("stop a batch; what it answered stays", tag, "Batch", None, (404, 409)),
                "parameters": batch_id,
            }
        },
    }
