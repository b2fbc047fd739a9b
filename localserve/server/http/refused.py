"""The HTTP edge's own refusal, in a module of its own: the checks that raise it also run in a
child process (child.py), whose start should not import the whole of errors.py's mapping."""

from __future__ import annotations


class Refused(Exception):
    """The HTTP edge's own refusals (server/http/guard.py, server/http/limits.py,
    server/http/bounds.py): a status, a message that says what to change, and the setting or
    field it names."""

    KINDS = {
        401: "authentication_error",
        403: "permission_error",
        408: "timeout_error",
        413: "invalid_request_error",
        503: "server_error",
    }

    def __init__(
        self, status: int, message: str, param: str | None = None, code: str | None = None
    ) -> None:
        super().__init__(message)
        self.status, self.param, self.code = status, param, code
