"""Forwarding a request to an upstream's Chat Completions (or Completions, Embeddings), and the
OpenAI face's pass-through.

The body goes as the client sent it, but for `model` (the upstream's own name): every field,
tools and response_format included, reaches the upstream, which answers for it. Its 4xx comes
back with its status and body as they are. Its answer comes back with `model` as the request
named it; a stream is relayed event by event, and one that stops before `[DONE]` ends with an
`error` event, as a local engine that stops does.

What counts against the upstream's breaker: a connection refused or timed out
(`upstream_connect_timeout`), no answer or a stalled stream (`upstream_first_byte_timeout`,
between any two reads), a stream cut off, and a 502, 503 or 504. Any other answer, a 4xx
included, shows it is up.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Callable
from typing import Any

import aiohttp
from aiohttp import web

from localserve.ground.errors import UpstreamUnavailable
from localserve.server.http import bounded_json
from localserve.server.http.request_log import record_of
from localserve.server.http.state import MANAGER, model_library
from localserve.server.http.streaming import open_sse, send_done, send_event
from localserve.server.upstream.registry import Registry, Route, describe
from localserve.store.names import is_name, parse_name

UPSTREAMS = web.AppKey("upstreams", Registry)
_FAILING_STATUSES = (502, 503, 504)
_OUR_PRIORITIES = ("interactive", "background")


def local_names(request: web.Request) -> Callable[[str], bool]:
    """Whether a name is a local model's (loaded, pulled or embedded): a local one wins."""
    manager = request.app[MANAGER]

    def local(name: str) -> bool:
        if manager.get(name) is not None:
            return True
        if not is_name(name):
            return False
        try:
            return model_library(request).find(parse_name(name)) is not None
        except TypeError:  # a manager without a model store (the OpenAPI document's)
            return False

    return local


def route(request: web.Request, name: Any) -> Route | None:
    """The upstream model of that name, or None (a local model, or none known). Called from
    server/turn/run.py's `on_model` alone: one place decides where a model runs."""
    registry = request.app.get(UPSTREAMS)
    if registry is None or not registry.upstreams or not isinstance(name, str) or not name:
        return None
    return registry.find(name, local_names(request))


@contextlib.asynccontextmanager
async def sent(
    request: web.Request, target: Route, path: str, body: dict[str, Any]
) -> AsyncIterator[aiohttp.ClientResponse]:
    """POST `body` to the upstream's `path`, with its model's own name; the response, whose
    body the caller reads. Unreachable: UpstreamUnavailable, a 503 naming it."""
    registry = request.app[UPSTREAMS]
    up = target.upstream
    record = record_of(request)
    if record is not None:  # the log line and the request metrics name the model as asked
        record.model = target.name
    up.admit()
    assert registry.session is not None
    # In flight from here, not from its answer's head: a whole answer's head comes at its end.
    with up.serving(target.model.id):
        try:
            response = await registry.session.post(
                f"{up.config.url}/{path}",
                json={**body, "model": target.model.id},
                headers=up.headers(),
                allow_redirects=False,
                timeout=registry.timeout(),
            )
        except (aiohttp.ClientError, asyncio.TimeoutError) as exc:
            raise up.failed(describe(exc)) from None
        except asyncio.CancelledError:
            up.breaker.trial_out = False  # a trial whose client left: the next one may try
            raise
        try:
            if 300 <= response.status < 400:
                # Not followed: the key goes to the upstream's own URL and nowhere else.
                where = response.headers.get("Location", "elsewhere")
                raise up.failed(
                    f"it redirected to {where}; redirects are not followed (the key goes to "
                    "its URL only): set its url to where it serves"
                )
            if response.status in _FAILING_STATUSES:
                up.failed(f"it answered {response.status}")
            else:
                up.breaker.succeeded()
            yield response
        finally:
            response.release()


def cut_off(target: Route, exc: BaseException | None) -> UpstreamUnavailable:
    """A stream that stopped before its end: counted against the upstream."""
    why = describe(exc) if exc is not None else "the stream ended before its last event"
    return target.upstream.failed(f"it stopped mid-answer: {why}")


async def events(response: aiohttp.ClientResponse) -> AsyncIterator[str]:
    """The `data` of each server-sent event, `[DONE]` included; comments and names skipped.
    Raises what the connection raises; ends when the upstream closes."""
    buffer = b""
    async for chunk in response.content.iter_any():
        # sse-starlette (llama-cpp-python's server) ends its lines with \r\n.
        buffer = (buffer + chunk).replace(b"\r\n", b"\n")
        while b"\n\n" in buffer:
            block, buffer = buffer.split(b"\n\n", 1)
            data = [
                line[5:].removeprefix(b" ")
                for line in block.split(b"\n")
                if line.startswith(b"data:")
            ]
            if data:
                yield b"\n".join(data).decode("utf-8", errors="replace")


async def chunks(target: Route, response: aiohttp.ClientResponse) -> AsyncIterator[Any]:
    """The JSON of each event up to `[DONE]` (an event that is not JSON: its text). A stream
    that stops before `[DONE]`, or whose connection fails, raises cut_off's 503."""
    try:
        async for data in events(response):
            if data == "[DONE]":
                return
            try:
                event = bounded_json.loads(data)
            except ValueError:
                event = data
            yield event
    except (aiohttp.ClientError, asyncio.TimeoutError) as exc:
        raise cut_off(target, exc) from None
    raise cut_off(target, None)


async def whole(target: Route, response: aiohttp.ClientResponse) -> Any:
    """An answer that is not a stream: its JSON. One cut off raises cut_off's 503."""
    try:
        return bounded_json.loads(await response.read())
    except (aiohttp.ClientError, asyncio.TimeoutError, ValueError) as exc:
        raise cut_off(target, exc) from None


def said_error(event: Any) -> str | None:
    """The message of an `error` event in a stream, or None for any other event."""
    error = event.get("error") if isinstance(event, dict) else None
    if not error:
        return None
    return str(error.get("message") if isinstance(error, dict) else error)


def error_text(raw: bytes, status: int) -> str:
    """The message of an upstream's error body (OpenAI's, FastAPI's `detail`, or plain text)."""
    try:
        body = bounded_json.loads(raw)
    except ValueError:
        return raw.decode("utf-8", errors="replace").strip() or f"status {status}"
    if isinstance(body, dict):
        error = body.get("error")
        if isinstance(error, dict) and error.get("message"):
            return str(error["message"])
        if isinstance(error, str):
            return error
        if "detail" in body:
            return (
                json.dumps(body["detail"])
                if not isinstance(body["detail"], str)
                else body["detail"]
            )
    return json.dumps(body)


async def passthrough(request: web.Request, response: aiohttp.ClientResponse) -> web.Response:
    """An answer that is not a 200 stream: its status and body as they came."""
    content = await response.read()
    kind = response.headers.get("Content-Type", "application/json")
    return web.Response(status=response.status, body=content, headers={"Content-Type": kind})


async def openai(
    request: web.Request, target: Route, path: str, body: dict[str, Any]
) -> web.StreamResponse:
    """/v1/chat/completions, /v1/completions or /v1/embeddings on an upstream model."""
    if body.get("priority") in _OUR_PRIORITIES:
        # localserve's own priority class, for its own scheduler: not the upstream's field
        # (vLLM's `priority` is a number, which passes through).
        body = {k: v for k, v in body.items() if k != "priority"}
    async with sent(request, target, path, body) as response:
        if response.status != 200:
            return await passthrough(request, response)
        # A server that answers a stream's request whole is answered whole.
        if "text/event-stream" not in response.headers.get("Content-Type", ""):
            answer = await whole(target, response)
            if isinstance(answer, dict) and "model" in answer:
                answer["model"] = target.name
            return web.json_response(answer)
        return await _relay(request, target, response)


async def _relay(
    request: web.Request, target: Route, response: aiohttp.ClientResponse
) -> web.StreamResponse:
    out = await open_sse(request)
    try:
        async for event in chunks(target, response):
            if isinstance(event, str):
                await out.write(f"data: {event}\n\n".encode())
                continue
            if isinstance(event, dict) and "model" in event:
                event["model"] = target.name
            await send_event(out, event)
    except UpstreamUnavailable as failure:
        error = {"message": str(failure), "type": "server_error", "code": "upstream_unavailable"}
        await send_event(out, {"error": error})
    await send_done(out)
    return out
