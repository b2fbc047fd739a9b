"""llama.cpp's /infill, which llama.vscode and llama.vim send their completions to.

The request is llama.cpp's: `input_prefix`, `input_suffix`, `input_extra` (other files, as
{filename, text}), `prompt` (text after the prefix), `n_predict` (-1: no cap; 0: only prefill,
which llama.vscode sends to warm the cache), the sampling fields, `samplers`, `stop`, `stream`,
`n_indent` and `t_max_predict_ms` (infill_rules.py). `model` may be left out: llama.cpp serves
one model, so the first loaded one answers. The prompt is built by server/chat/fim.py. The answer is
in llama.cpp's /completion shape (`content`, `stop`, `tokens_predicted`, `tokens_evaluated`,
`stop_type`, `truncated`, `tokens_cached`, `timings`), streamed as `data: {...}` events with no
[DONE], as llama.cpp streams it.

What we do not have is said, not faked: no `prompt` text, `tokens` or `id_slot` in the
answer, and `stop_type` is "word" for any stop of a request that named stop strings, since the
daemon cannot tell such a stop from an end-of-generation token ("eos" without them). The
request is declared, and its fields we do not honour refused, in llamacpp/request.py.
`cache_prompt` and `t_max_prompt_ms` are accepted: prefixes are always reused here, and
llama.cpp does not implement `t_max_prompt_ms` either.
"""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Any

from aiohttp import web

from localserve.engine.worker_client.resident import ResidentModel
from localserve.engine.worker_client.stream import RequestStream
from localserve.ground.errors import BadRequest, EngineError
from localserve.ground.sampling import SamplingParams
from localserve.server.chat import fim
from localserve.server.chat.pieces import outputs
from localserve.server.chat.plan import ChatPlan
from localserve.server.http.readers import keep_alive, read_json
from localserve.server.http.state import MANAGER
from localserve.server.http.streaming import open_sse, send_event
from localserve.server.llamacpp.infill_rules import LineRules
from localserve.server.llamacpp.request import read_infill
from localserve.server.turn.ask import Ask
from localserve.server.turn.local import local_turn


async def infill(request: web.Request) -> web.StreamResponse:
    body = await read_json(request)
    req = read_infill(body)
    fill, params = req.fill, req.params
    # llama.vim sends a blank model name by default: llama.cpp serves one model and ignores it.
    name = req.model or _only_model(request)
    filled: list[fim.FimPrompt] = []

    async def prompt(
        model: ResidentModel, _: ChatPlan, params: SamplingParams
    ) -> tuple[list[int] | str, SamplingParams]:
        if params.penalty_last_n < 0:  # llama.cpp's -1: the whole context
            params = replace(params, penalty_last_n=model.info.n_ctx_slot)
        filled.append(await fim.encode(model, fill, model.info.n_ctx_slot, "input_suffix"))
        return filled[0].tokens, params

    ask = Ask(
        name,
        [],
        params,
        keep_alive=keep_alive(body),
        prompt=prompt,
        prompt_field="input_prefix",
        templated=False,
    )
    async with local_turn(request, ask) as turn:
        answer = _Answer(
            turn.model, turn.seq, params, filled[0].truncated, req.n_predict, req.fields
        )
        if req.stream:
            return await answer.stream(request, req.rules)
        return web.json_response(await answer.collect(req.rules))


def _only_model(request: web.Request) -> str:
    models = request.app[MANAGER].models
    if not models:
        raise BadRequest("'model' is required: no model is loaded", "model")
    return models[0].name


# -- the answer ------------------------------------------------------------------------------


class _Answer:
    """One fill's answer in llama.cpp's shape, whole or as a stream of events."""

    def __init__(
        self,
        model: ResidentModel,
        seq: RequestStream,
        params: SamplingParams,
        truncated: bool,
        n_predict: int | None,
        fields: list[str] | None,
    ) -> None:
        self.model, self.seq, self.params = model, seq, params
        self.truncated = truncated
        self.n_predict = -1 if n_predict is None else n_predict
        self.prefill_only = n_predict == 0
        self.fields = fields
        self.cut = False  # a line rule ended the fill

    async def pieces(self, rules: LineRules) -> Any:
        """The text to send, piece by piece, until the sequence or a line rule ends it."""
        seq = self.seq
        async for delta in outputs(seq):
            assert delta is not None
            if self.prefill_only:
                continue
            since = time.monotonic() - (seq.first_token_at or time.monotonic())
            text, stop = rules.feed(delta.text, since)
            if text:
                yield text
            if stop:
                self.cut = True
                return

    async def collect(self, rules: LineRules) -> dict[str, Any]:
        return self._final("".join([p async for p in self.pieces(rules)]))

    async def stream(self, request: web.Request, rules: LineRules) -> web.StreamResponse:
        response = await open_sse(request)
        try:
            async for text in self.pieces(rules):
                await send_event(
                    response,
                    self._filter(
                        {
                            "index": 0,
                            "content": text,
                            "stop": False,
                            "tokens_predicted": self.seq.completion_tokens,
                            "tokens_evaluated": self.seq.prompt_tokens,
                        }
                    ),
                )
        except EngineError as exc:
            await send_event(
                response, {"error": {"code": 500, "message": str(exc), "type": "server_error"}}
            )
        else:
            await send_event(response, self._final(""))
        await response.write_eof()
        return response

    def _final(self, content: str) -> dict[str, Any]:
        seq, timings = self.seq, self.seq.timings()
        predicted = 0 if self.prefill_only else seq.completion_tokens
        prompt_n = seq.prompt_tokens - seq.cached_tokens
        prompt_s = timings.ttft_s if timings.ttft_s is not None else timings.total_s
        prompt_ms, predicted_ms = prompt_s * 1e3, timings.decode_s * 1e3
        return self._filter(
            {
                "index": 0,
                "content": content,
                "stop": True,
                "model": self.model.name,
                "tokens_predicted": predicted,
                "tokens_evaluated": seq.prompt_tokens,
                "generation_settings": {
                    "n_predict": self.n_predict,
                    "temperature": self.params.temperature,
                    "top_k": self.params.top_k,
                    "top_p": self.params.top_p,
                    "min_p": self.params.min_p,
                    "stop": list(self.params.stop),
                },
                "has_new_line": "\n" in content,
                "truncated": self.truncated,
                "stop_type": self._stop_type(),
                "stopping_word": seq.stop_sequence or "",
                "tokens_cached": seq.cached_tokens,
                "timings": {
                    "cache_n": seq.cached_tokens,
                    "prompt_n": prompt_n,
                    "prompt_ms": prompt_ms,
                    "prompt_per_token_ms": prompt_ms / max(1, prompt_n),
                    "prompt_per_second": prompt_n / max(1e-9, prompt_ms / 1e3),
                    "predicted_n": predicted,
                    "predicted_ms": predicted_ms,
                    "predicted_per_token_ms": predicted_ms / max(1, predicted),
                    "predicted_per_second": predicted / max(1e-9, predicted_ms / 1e3),
                },
            }
        )

    def _stop_type(self) -> str:
        if self.cut or self.prefill_only or self.seq.finish_reason == "length":
            return "limit"
        return "word" if self.seq.stop_sequence is not None else "eos"

    def _filter(self, answer: dict[str, Any]) -> dict[str, Any]:
        """llama.cpp's `response_fields`: only the fields named ("timings/prompt_n" reaches
        inside), each under the name it was asked by."""
        if self.fields is None:
            return answer
        kept: dict[str, Any] = {}
        for path in self.fields:
            value: Any = answer
            for part in path.split("/"):
                value = value.get(part) if isinstance(value, dict) else None
            if value is not None:
                kept[path] = value
        return kept


def add_routes(app: web.Application) -> None:
    app.router.add_post("/infill", infill)
