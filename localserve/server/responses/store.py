"""Stored responses, for the Responses API's `store` and `previous_response_id`.

A response stored (`store` is true unless the request says otherwise, as in OpenAI's API) keeps
its conversation: every message before it and its own answer, as the chat template reads
them. A follow-up that names it continues from that conversation, with its own
`instructions`. They live in the daemon's memory only, at most MAX_RESPONSES of them for at most
MAX_AGE_S each, the oldest going first; a restart forgets them, and an id that is gone (or never
was) is a 404.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from aiohttp import web

MAX_RESPONSES = 512
MAX_AGE_S = 6 * 3600.0


@dataclass(frozen=True)
class StoredResponse:
    conversation: list[dict[str, Any]]  # without the instructions
    body: dict[str, Any]  # the response object, as GET /v1/responses/{id} gives it
    stored_at: float


class ResponseStore:
    def __init__(self, max_responses: int = MAX_RESPONSES, max_age_s: float = MAX_AGE_S) -> None:
        self._responses: OrderedDict[str, StoredResponse] = OrderedDict()
        self.max_responses = max_responses
        self.max_age_s = max_age_s

    def put(
        self, response_id: str, conversation: list[dict[str, Any]], body: dict[str, Any]
    ) -> None:
        self._responses[response_id] = StoredResponse(conversation, body, time.monotonic())
        self._expire()

    def get(self, response_id: str) -> StoredResponse | None:
        self._expire()
        return self._responses.get(response_id)

    def delete(self, response_id: str) -> bool:
        return self._responses.pop(response_id, None) is not None

    def _expire(self) -> None:
        oldest = time.monotonic() - self.max_age_s
        while self._responses and (
            len(self._responses) > self.max_responses
            or next(iter(self._responses.values())).stored_at < oldest
        ):
            self._responses.popitem(last=False)


RESPONSES = web.AppKey("responses", ResponseStore)
