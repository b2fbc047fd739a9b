"""What every API face reads from a request the same way: the JSON body, the model it names,
its chat messages and its keep_alive."""

from __future__ import annotations

import asyncio
from typing import Any

from aiohttp import web

from localserve.ground.errors import BadRequest
from localserve.ground.units import UNSET, KeepAlive, parse_keep_alive
from localserve.server.http import body_check, bounded_json, limits
from localserve.server.http import validation as v
from localserve.server.http.child import Child
from localserve.server.http.state import MANAGER, owned

# The parsed body, kept on the request for its log line (request_log.py's --log-prompts).
BODY = "localserve.body"

# A body larger than this is checked in a child process (server/http/child.py), and only its
# parse, one C call, runs here, on a thread. A smaller one is read on the loop: 1 MiB of the
# worst kind (escaped quotes, token ids) takes about 25 ms.
_IN_A_CHILD = 1 << 20


async def read_json(request: web.Request) -> v.JSON:
    """The body as a JSON object, within the limits of server/http/limits.py,
    server/http/bounded_json.py (a 413 naming `max_json_values`) and server/http/bounds.py.
    Read once: a handler that looked at it first (to route it upstream) hands the face the same
    object."""
    if BODY in request:
        body: v.JSON = request[BODY]
        return body
    settings = request.app[MANAGER].settings
    raw = await limits.read_body(request, settings)
    if len(raw) > _IN_A_CHILD:
        refusal = await request.app[BODY_CHECKER].run(
            body_check.refusal, raw, request.path, settings
        )
        if refusal is not None:
            raise refusal.error()
        body = await asyncio.to_thread(bounded_json.parse_checked, raw)
    else:
        body = body_check.checked(raw, request.path, settings)
    request[BODY] = body
    return body


BODY_CHECKER = web.AppKey("body_checker", Child)


def install(app: web.Application) -> None:
    """The app's child for large bodies, closed with the app."""
    owned(app, BODY_CHECKER, Child(body_check.__name__))


def model_name(body: v.JSON, accept_name: bool = True) -> str:
    """The model a request names, in `model`; with `accept_name`, also in `name`.

    `name` is what Ollama's clients sent before `model`, and its server still takes it on
    /api/show, /api/pull and /api/delete (not on generate, chat or embed): `model` wins when a
    body has both. An empty string counts as missing, as it does in Ollama.
    """
    name = v.string(body, "model")
    if not name and accept_name:
        name = v.string(body, "name")
    if not name:
        raise BadRequest("'model' is required", "model")
    return name


def keep_alive(body: v.JSON) -> KeepAlive:
    """The request's keep_alive in seconds (None: for ever), or UNSET when it sent none.

    JSON null is no keep_alive at all, as in Ollama, whose clients send null for "not given".
    """
    value = body.get("keep_alive")
    if value is None:
        return UNSET
    return parse_keep_alive(value)


# The roles a conversation may hold, as templates know them: OpenAI's "developer" is what its
# newer models call the system message.
ROLES = {
    "system": "system",
    "developer": "system",
    "user": "user",
    "assistant": "assistant",
    "tool": "tool",
}


def chat_messages(body: v.JSON) -> list[dict[str, Any]]:
    """Messages as the chat template expects them: role and plain-text content."""
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise BadRequest("'messages' must be a non-empty list", "messages")
    out: list[dict[str, Any]] = []
    for i, m in enumerate(messages):
        if not isinstance(m, dict) or not isinstance(m.get("role"), str):
            raise BadRequest(f"messages[{i}] must be an object with a string 'role'", "messages")
        role = ROLES.get(m["role"])
        if role is None:
            raise BadRequest(
                f"messages[{i}].role is {m['role']!r}; it must be one of "
                f"{', '.join(sorted(ROLES))}",
                "messages",
            )
        out.append({**m, "role": role, "content": text_content(m.get("content"), f"messages[{i}]")})
    return out


def text_content(
    content: Any, where: str, field: str = "messages", kinds: tuple[str, ...] = ("text",)
) -> str:
    """A message's content: a string, or a list of parts whose `type` is one of `kinds` (their
    `text`; a refusal's `refusal`). Any other part is a 400: the models served here read text."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise BadRequest(f"{where}.content must be a string or a list", field)
    texts = []
    for part in content:
        kind = part.get("type") if isinstance(part, dict) else None
        if kind not in kinds:
            raise BadRequest(f"{where}: only text content parts are supported, not {kind!r}", field)
        texts.append(str(part.get("refusal" if kind == "refusal" else "text") or ""))
    return "".join(texts)
