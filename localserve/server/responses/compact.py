"""POST /v1/responses/compact: a conversation made short, as Codex asks when its context fills
(OpenAI's, and Ollama's since September).

The model summarizes the conversation it is sent (the Responses request's `model`, `input`
and `instructions`); the answer is a `response.compaction` object whose output is the
conversation's user messages, as they were, then one `compaction` item holding the summary.
The client sends those items in place of the turns they replace, and request.py puts the
summary back into the prompt as a message. The summary is plain text here: no local model can
read OpenAI's ciphertext, and there is nothing to hide from the user who runs the server.

A conversation compacted before starts at its newest summary: that summary holds every turn
before it (earlier summaries included), so those turns are neither summarized again nor kept,
and a conversation compacted many times carries one summary, not one for each time.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import replace
from typing import Any

from aiohttp import web

from localserve.server.http.readers import read_json
from localserve.server.responses.api import usage_of
from localserve.server.responses.request import COMPACT, read_request
from localserve.server.turn.run import on_model, run_turn
from localserve.server.upstream import agent_translate
from localserve.server.upstream.registry import Route

ASK_FOR_SUMMARY = (
    "Summarize the conversation above so that it can go on from the summary alone: the task "
    "and the user's requests, decisions made, files and commands involved, what is done, what "
    "is left, and the next step. Write only the summary."
)
# The summary's cap, if the request sets none: long enough to carry a task's state.
SUMMARY_TOKENS = 2048


async def compact(request: web.Request, target: Route | None) -> web.Response:
    body = await read_json(request)
    items, summary_at = since_newest_summary(body.get("input"))
    body = {**body, "input": items}
    req = read_request(body, COMPACT)
    ask = req.ask
    messages = list(ask.messages)
    if messages and messages[-1]["role"] == "user":  # templates that insist turns alternate
        last = messages[-1]
        messages[-1] = {**last, "content": f"{last['content']}\n\n{ASK_FOR_SUMMARY}"}
    else:
        messages.append({"role": "user", "content": ASK_FOR_SUMMARY})
    cap = ask.params.max_tokens or SUMMARY_TOKENS
    ask = replace(ask, messages=messages, tools=None, params=replace(ask.params, max_tokens=cap))

    def upstream_request(target: Route) -> dict[str, Any]:
        return agent_translate.responses_request(body, ask, target.model.id, False)

    async with run_turn(request, ask, target, upstream_request) as turn:
        summary = "".join([piece.content async for piece in turn.pieces() if piece is not None])
        usage = usage_of(turn)
    # The newest summary gives way to the new one; the user messages after it are kept.
    kept = [_user_item(m["content"]) for m in req.input[summary_at + 1 :] if m["role"] == "user"]
    compaction = {
        "type": "compaction",
        "id": f"cmp_{uuid.uuid4().hex}",
        "encrypted_content": summary,
    }
    return web.json_response(
        {
            "id": f"resp_{uuid.uuid4().hex}",
            "object": "response.compaction",
            "created_at": int(time.time()),
            "output": [*kept, compaction],
            "usage": usage,
        }
    )


def since_newest_summary(items: Any) -> tuple[Any, int]:
    """The input from its newest `compaction` item on, with the instructions before it (system
    and developer messages, which no summary replaces); and where that summary is among them,
    or -1 when there is none (the input as sent, which read_request then checks)."""
    if not isinstance(items, list):
        return items, -1
    newest = max((i for i, item in enumerate(items) if _kind(item) == "compaction"), default=-1)
    if newest < 0:
        return items, -1
    instructions = [
        item
        for item in items[:newest]
        if _kind(item) == "message" and item.get("role") in ("system", "developer")
    ]
    # Each instruction is one message of the request, and so is the summary: it follows them.
    return [*instructions, *items[newest:]], len(instructions)


def _kind(item: Any) -> str | None:
    """An input item's type as request.py reads it: a message may leave its `type` out."""
    if not isinstance(item, dict):
        return None
    kind = item.get("type") or ("message" if "role" in item else None)
    return kind if isinstance(kind, str) else None


def _user_item(text: str) -> dict[str, Any]:
    return {
        "type": "message",
        "role": "user",
        "content": [{"type": "input_text", "text": text}],
    }


def add_routes(app: web.Application) -> None:
    app.router.add_post("/v1/responses/compact", on_model(compact))
