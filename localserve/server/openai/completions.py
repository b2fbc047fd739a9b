"""OpenAI's face: /v1/chat/completions, /v1/completions and /v1/models."""

from __future__ import annotations

import asyncio
import time
import uuid
from dataclasses import replace
from datetime import datetime, timezone
from typing import Any

from aiohttp import web

from localserve.engine.worker_client.resident import ResidentModel
from localserve.formats import BadModelFile
from localserve.ground.errors import BadRequest, ContextOverflow, EngineError, ModelNotFound
from localserve.ground.sampling import SamplingParams
from localserve.server.chat import fim
from localserve.server.chat.answer_parser import Call, Parsed
from localserve.server.chat.plan import ChatPlan, read_effort
from localserve.server.http import validation as v
from localserve.server.http.readers import (
    BODY,
    read_json,
)
from localserve.server.http.state import MANAGER, aliases, context_length, model_library
from localserve.server.http.streaming import (
    KEEPALIVE_S,
    open_sse,
    send_done,
    send_event,
    send_keepalive,
)
from localserve.server.turn.ask import Answering, Ask, whole
from localserve.server.turn.local import local_turn
from localserve.server.turn.run import on_model
from localserve.server.upstream import forward as upstream
from localserve.server.upstream import listing
from localserve.server.upstream.registry import Route
from localserve.server.wire import openai as wire
from localserve.store.manifest import Manifest

EFFORT = "reasoning_effort"


def _echoed(prompt: Any) -> str:
    """The prompt as `echo` repeats it. The daemon holds no vocabulary to turn token ids back
    into text, so echoing them is refused; a prompt of another kind is refused as the prompt."""
    if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], str):
        prompt = prompt[0]
    # The first item decides: a list of anything else is refused as the prompt in any case.
    if isinstance(prompt, list) and prompt and isinstance(prompt[0], int):
        raise BadRequest("'echo' needs the prompt as text; token ids are not echoed", "echo")
    return prompt if isinstance(prompt, str) else ""


def usage(turn: Answering) -> dict[str, Any]:
    return {
        "prompt_tokens": turn.prompt_tokens,
        "completion_tokens": turn.completion_tokens,
        "total_tokens": turn.prompt_tokens + turn.completion_tokens,
        "prompt_tokens_details": {"cached_tokens": turn.cached_tokens},
    }


def finish_reason(turn: Answering, calls: list[Call]) -> str:
    if turn.finish_reason == "length":
        return "length"
    return "tool_calls" if calls else "stop"


def tool_call(call: Call, streamed: bool) -> dict[str, Any]:
    """A call as OpenAI writes it: arguments as JSON text. A streamed call comes in two deltas
    under its index: the id, type and name first, then the arguments."""
    if streamed:
        function = {"name": call.name, "arguments": ""}
        return {"index": call.index, "id": call.id, "type": "function", "function": function}
    function = {"name": call.name, "arguments": call.arguments_json}
    return {"id": call.id, "type": "function", "function": function}


class Generation:
    """One request's answer: its body read into an `Ask`, the turn run, deltas (or one whole
    answer) written in OpenAI's shape."""

    def __init__(self, request: web.Request, chat: bool) -> None:
        self.request = request
        self.chat = chat
        self.id = ("chatcmpl-" if chat else "cmpl-") + uuid.uuid4().hex[:24]
        self.created = int(time.time())
        self.echo = ""  # completions' `echo`: the prompt, put before the answer's text

    async def run(self) -> web.StreamResponse:
        ask = self.ask(await read_json(self.request))
        async with local_turn(self.request, ask) as turn:
            if self.stream:
                return await self._stream(turn)
            return await self._collect(turn)

    def ask(self, body: v.JSON) -> Ask:
        declared = wire.CHAT_COMPLETION if self.chat else wire.COMPLETION
        got = declared.read(body)
        self.stream = got["stream"]
        self.include_usage = got["stream_options"]["include_usage"]
        params = declared.sampling(got)
        if not self.chat:
            prompt, suffix = body.get("prompt"), got["suffix"]
            self.echo = _echoed(prompt) if got["echo"] else ""

            async def tokens(
                model: ResidentModel, _: ChatPlan, params: SamplingParams
            ) -> tuple[list[int] | str, SamplingParams]:
                return await _encode_prompt(model, prompt, suffix), params

            return Ask(
                got["model"],
                [],
                params,
                keep_alive=got["keep_alive"],
                prompt=tokens,
                prompt_field="prompt",
                templated=False,
            )
        effort = read_effort(body.get(EFFORT), EFFORT, EFFORT)
        return Ask(
            got["model"],
            got["messages"],
            params,
            tools=got["tools"],
            think=None if effort is None else effort != "none",
            think_field="chat_template_kwargs" if effort is None else EFFORT,
            keep_alive=got["keep_alive"],
            variables=got["chat_template_kwargs"],
        )

    def _envelope(self, turn: Answering, choice: dict[str, Any], chunk: bool) -> v.JSON:
        if self.chat:
            kind = "chat.completion.chunk" if chunk else "chat.completion"
        else:
            kind = "text_completion"
        return {
            "id": self.id,
            "object": kind,
            "created": self.created,
            "model": turn.model_name,
            "system_fingerprint": "localserve",
            "choices": [choice],
        }

    def _choice(self, text: str | None, reason: str | None, chunk: bool) -> dict[str, Any]:
        if not self.chat:
            return {"index": 0, "text": text or "", "logprobs": None, "finish_reason": reason}
        if chunk:
            delta = {} if text is None else {"content": text}
            return {"index": 0, "delta": delta, "logprobs": None, "finish_reason": reason}
        message = {"role": "assistant", "content": text or ""}
        return {"index": 0, "message": message, "logprobs": None, "finish_reason": reason}

    def _message(self, answer: Parsed, reason: str) -> dict[str, Any]:
        choice = self._choice(answer.content, reason, False)
        if self.chat:
            message = choice["message"]
            if answer.thinking:
                message["reasoning_content"] = answer.thinking  # llama.cpp's and DeepSeek's name
            if answer.calls:
                message["tool_calls"] = [tool_call(c, False) for c in answer.calls]
                message["content"] = answer.content or None
        return choice

    def _deltas(self, piece: Parsed) -> list[dict[str, Any]]:
        """The stream's chunks for one parsed piece: thinking, content, then each call."""
        if not self.chat:
            return [self._choice(piece.content, None, True)] if piece.content else []
        deltas: list[dict[str, Any]] = []
        if piece.thinking:
            deltas.append({"reasoning_content": piece.thinking})
        if piece.content:
            deltas.append({"content": piece.content})
        for call in piece.calls:
            deltas.append({"tool_calls": [tool_call(call, True)]})
            arguments = {"arguments": call.arguments_json}
            deltas.append({"tool_calls": [{"index": call.index, "function": arguments}]})
        return [{"index": 0, "delta": d, "logprobs": None, "finish_reason": None} for d in deltas]

    async def _collect(self, turn: Answering) -> web.Response:
        answer = await whole(turn)
        if self.echo:
            answer = replace(answer, content=self.echo + answer.content)
        choice = self._message(answer, finish_reason(turn, answer.calls))
        body = self._envelope(turn, choice, False)
        body["usage"] = usage(turn)
        return web.json_response(body)

    async def _stream(self, turn: Answering) -> web.StreamResponse:
        response = await open_sse(self.request)
        extra = {"usage": None} if self.include_usage else {}
        if self.chat:
            first = self._choice(None, None, True)
            first["delta"] = {"role": "assistant", "content": ""}
            await send_event(response, {**self._envelope(turn, first, True), **extra})
        elif self.echo:
            first = self._choice(self.echo, None, True)
            await send_event(response, {**self._envelope(turn, first, True), **extra})
        try:
            async for piece in turn.pieces(KEEPALIVE_S):
                if piece is None:
                    await send_keepalive(response)
                    continue
                for choice in self._deltas(piece):
                    await send_event(response, {**self._envelope(turn, choice, True), **extra})
        except EngineError as exc:
            await send_event(response, {"error": {"message": str(exc), "type": "server_error"}})
        else:
            choice = self._choice(None, finish_reason(turn, turn.calls), True)
            await send_event(response, {**self._envelope(turn, choice, True), **extra})
        if self.include_usage:
            tail = self._envelope(turn, self._choice(None, None, True), True)
            tail["choices"] = []
            tail["usage"] = usage(turn)
            await send_event(response, tail)
        await send_done(response)
        return response


async def _encode_prompt(model: ResidentModel, prompt: Any, suffix: str | None) -> list[int]:
    if suffix is not None:  # fill-in-the-middle: the model's FIM tokens, no template
        return (await fim.encode(model, fim.openai_fill(prompt, suffix))).tokens
    if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], str):
        prompt = prompt[0]
    if isinstance(prompt, str):
        return await model.encode_prompt(prompt)
    if isinstance(prompt, list) and prompt and type(prompt[0]) is int:
        # Ids past the slot's context are refused before any is looked at: a body's worth is
        # 8 million of them, seconds of Python on the event loop. Within it, the type check
        # runs in C (map, set), and the vocabulary's walks at most a context of ids.
        if len(prompt) > model.info.n_ctx_slot:
            raise ContextOverflow(len(prompt), model.info.n_ctx_slot)
        if set(map(type, prompt)) == {int}:  # type(True) is bool: a bool is no token id
            return model.check_token_ids(list(prompt))
    raise BadRequest("'prompt' must be a string or a list of token ids", "prompt")


async def chat_completions(request: web.Request, target: Route | None) -> web.StreamResponse:
    if target is not None:  # the one answer not run as a turn: forwarded byte for byte
        return await upstream.openai(request, target, "chat/completions", request[BODY])
    return await Generation(request, chat=True).run()


async def completions(request: web.Request, target: Route | None) -> web.StreamResponse:
    if target is not None:
        return await upstream.openai(request, target, "completions", request[BODY])
    return await Generation(request, chat=False).run()


def model_entry(name: str, created: int, context: int) -> dict[str, Any]:
    """One model as OpenAI's clients list it, and as Anthropic's do (`type`, `display_name`,
    `created_at`): both SDKs read /v1/models."""
    when = datetime.fromtimestamp(created, timezone.utc).isoformat().replace("+00:00", "Z")
    return {
        "id": name,
        "object": "model",
        "created": created,
        "owned_by": "localserve",
        "context_length": context,
        "type": "model",
        "display_name": name,
        "created_at": when,
    }


async def _created(request: web.Request) -> tuple[dict[str, int], set[str]]:
    """Every model a request may name, with when it was made: the library's (loaded or not)
    and those served by path; and the stored ones whose files are damaged or gone."""
    manager = request.app[MANAGER]
    served = list(manager.known.values())
    library = model_library(request)

    def read() -> tuple[list[Manifest], set[str]]:
        stored = library.models(served)
        return stored, {m.name.short for m in stored if library.damage(m) is not None}

    stored, damaged = await asyncio.get_running_loop().run_in_executor(None, read)
    created = {m.name.short: int(m.created_at) for m in stored}
    for m in manager.models:
        created.setdefault(m.name, int(m.loaded_at))
        damaged.discard(m.name)  # loaded, it runs from memory whatever became of its file
    for alias, model in aliases(request).items():
        if model in created:
            created.setdefault(alias, created[model])
            if model in damaged:
                damaged.add(alias)
    return created, damaged


async def _listed_context(request: web.Request, name: str) -> int | None:
    """The model's context, or None where its file cannot be read: the header of one whose
    sizes look whole may still be broken."""
    try:
        return await context_length(request, name)
    except (EngineError, BadModelFile, OSError) as exc:
        model_library(request).note_damage(name, str(exc))
        return None


async def list_models(request: web.Request) -> web.Response:
    """A damaged model is left out (OpenAI's list has no field to mark it; /api/tags marks it)
    rather than failing the list for every client."""
    created, damaged = await _created(request)
    listed = sorted((name, ts) for name, ts in created.items() if name not in damaged)
    contexts = await asyncio.gather(*(_listed_context(request, name) for name, _ in listed))
    data = [
        model_entry(name, ts, ctx) for (name, ts), ctx in zip(listed, contexts) if ctx is not None
    ]
    # Every local name, the damaged too: a request for one still reaches it, not an upstream.
    data += [listing.openai_entry(r) for r in listing.routes(request, created)]
    first, last = (data[0]["id"], data[-1]["id"]) if data else (None, None)
    return web.json_response(
        {"object": "list", "data": data, "has_more": False, "first_id": first, "last_id": last}
    )


async def get_model(request: web.Request) -> web.Response:
    name = request.match_info["model"]
    created, _ = await _created(request)
    found = created.get(name, created.get(name.removesuffix(":latest")))
    if found is None:
        remote = [r for r in listing.routes(request, created) if r.name == name]
        if remote:
            return web.json_response(listing.openai_entry(remote[0]))
        raise ModelNotFound(name)
    name = name.removesuffix(":latest")
    return web.json_response(model_entry(name, found, await context_length(request, name)))


def add_routes(app: web.Application) -> None:
    app.router.add_post("/v1/chat/completions", on_model(chat_completions))
    app.router.add_post("/v1/completions", on_model(completions))
    app.router.add_get("/v1/models", list_models)
    app.router.add_get("/v1/models/{model}", get_model)


__all__ = ["MANAGER", "add_routes"]
