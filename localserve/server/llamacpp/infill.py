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
daemon cannot tell such a stop from an end-of-generation token ("eos" without them).
llama.cpp's fields that would change the answer and that we do not honour get a 400 naming
them, unless they hold llama.cpp's default (which changes nothing); unknown fields are ignored.
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
from localserve.server.http import validation as v
from localserve.server.http.readers import keep_alive, read_json
from localserve.server.http.state import MANAGER
from localserve.server.http.streaming import open_sse, send_event
from localserve.server.llamacpp.infill_rules import LineRules
from localserve.server.turn.ask import Ask
from localserve.server.turn.local import local_turn

# llama.cpp's fields we do not honour, with the value that changes nothing.
_IDLE_DEFAULTS: dict[str, Any] = {
    "n_probs": 0,
    "logit_bias": None,
    "grammar": "",
    "json_schema": None,
    "lora": None,
    "n_keep": 0,
    "n_discard": 0,
    "id_slot": -1,
    "min_keep": 0,
    "mirostat": 0,
    "dynatemp_range": 0,
    "typical_p": 1,
    "top_n_sigma": -1,
    "xtc_probability": 0,
    "dry_multiplier": 0,
    "return_tokens": False,
    "post_sampling_probs": False,
    "timings_per_token": False,
    "return_progress": False,
    "n_cmpl": 1,
}
# Our sampler chain, in its order (backends/llama_cpp.py), by llama.cpp's names and letters.
_CHAIN = ("penalties", "top_k", "top_p", "min_p", "infill", "temperature")
_ALIASES = {
    "e": "penalties",
    "k": "top_k",
    "top-k": "top_k",
    "topk": "top_k",
    "p": "top_p",
    "top-p": "top_p",
    "topp": "top_p",
    "nucleus": "top_p",
    "m": "min_p",
    "min-p": "min_p",
    "minp": "min_p",
    "i": "infill",
    "t": "temperature",
    "temp": "temperature",
}
# llama.cpp's samplers that do nothing at their defaults, which no field here can change.
_IDLE_SAMPLERS = frozenset(
    {"dry", "d", "typ_p", "typ-p", "typp", "typ", "typical_p", "y", "top_n_sigma", "s", "xtc", "x"}
)


async def infill(request: web.Request) -> web.StreamResponse:
    body = await read_json(request)
    _refuse_unhonoured(body)
    fill = _fill(body)
    n_predict = v.integer(body, "n_predict", -1, -1, 1 << 30)
    params = _sampling(body, n_predict)
    rules = LineRules(
        v.integer(body, "n_indent", 0, 0, 1 << 20) or 0,
        v.integer(body, "t_max_predict_ms", -1, -1, 1 << 40) or -1,
    )
    v.boolean(body, "cache_prompt", True)
    v.integer(body, "t_max_prompt_ms", -1, -1, 1 << 40)
    fields = _response_fields(body)
    stream = v.boolean(body, "stream", False)
    # llama.vim sends a blank model name by default: llama.cpp serves one model and ignores it.
    name = (v.string(body, "model") or "").strip() or _only_model(request)
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
        answer = _Answer(turn.model, turn.seq, params, filled[0].truncated, n_predict, fields)
        if stream:
            return await answer.stream(request, rules)
        return web.json_response(await answer.collect(rules))


def _only_model(request: web.Request) -> str:
    models = request.app[MANAGER].models
    if not models:
        raise BadRequest("'model' is required: no model is loaded", "model")
    return models[0].name


# -- the request -----------------------------------------------------------------------------


def _refuse_unhonoured(body: v.JSON) -> None:
    for field, default in _IDLE_DEFAULTS.items():
        value = body.get(field)
        if value is not None and value != default and value not in ([], {}):
            raise BadRequest(f"'{field}' is not supported by this server's /infill", field)


def _fill(body: v.JSON) -> fim.Fill:
    extra = body.get("input_extra") or []
    if not isinstance(extra, list):
        raise BadRequest("'input_extra' must be a list of {filename, text}", "input_extra")
    files: list[tuple[str, str]] = []
    for chunk in extra:
        if not isinstance(chunk, dict):
            raise BadRequest("each 'input_extra' chunk must be {filename, text}", "input_extra")
        text = v.string(chunk, "text", required=True)
        files.append((v.string(chunk, "filename") or "tmp", text or ""))
    return fim.Fill(
        prefix=v.string(body, "input_prefix", required=True) or "",
        suffix=v.string(body, "input_suffix", required=True) or "",
        prompt=v.string(body, "prompt") or "",
        extra=tuple(files),
        repo_header=True,
    )


def _sampling(body: v.JSON, n_predict: int | None) -> SamplingParams:
    """llama.cpp's sampling fields and defaults; `samplers` names the ones that apply."""
    last_n = v.integer(body, "repeat_last_n", 64, -1, 1 << 20)
    params = SamplingParams(
        temperature=v.number(body, "temperature", 0.8, 0.0, 10.0),
        top_k=v.integer(body, "top_k", 40, 0, 1 << 20) or 0,
        top_p=v.number(body, "top_p", 0.95, 0.0, 1.0),
        min_p=v.number(body, "min_p", 0.05, 0.0, 1.0),
        repeat_penalty=v.number(body, "repeat_penalty", 1.0, 0.0, 10.0),
        presence_penalty=v.number(body, "presence_penalty", 0.0, -2.0, 2.0),
        frequency_penalty=v.number(body, "frequency_penalty", 0.0, -2.0, 2.0),
        penalty_last_n=-1 if last_n is None else last_n,
        seed=_seed(v.integer(body, "seed", None, -1, (1 << 32) - 1)),
        # n_predict 0 only prefills; the one token it costs is not sent.
        max_tokens=None if n_predict is None or n_predict < 0 else max(1, n_predict),
        stop=v.stop_list(body),
        ignore_eos=v.boolean(body, "ignore_eos", False),
    )
    chosen = _samplers(body)
    if chosen is None:
        chosen = list(_CHAIN[:4]) + ["temperature"]  # llama.cpp's default chain, less infill
    if last_n == 0:  # llama.cpp: no tokens to look back over, no penalties
        chosen = [name for name in chosen if name != "penalties"]
    return replace(
        params,
        top_k=params.top_k if "top_k" in chosen else 0,
        top_p=params.top_p if "top_p" in chosen else 1.0,
        min_p=params.min_p if "min_p" in chosen else 0.0,
        temperature=params.temperature if "temperature" in chosen else 1.0,
        repeat_penalty=params.repeat_penalty if "penalties" in chosen else 1.0,
        presence_penalty=params.presence_penalty if "penalties" in chosen else 0.0,
        frequency_penalty=params.frequency_penalty if "penalties" in chosen else 0.0,
        infill="infill" in chosen,
    )


def _seed(seed: int | None) -> int | None:
    return None if seed is None or seed == -1 else seed


def _samplers(body: v.JSON) -> list[str] | None:
    """The samplers asked for (llama.cpp's names, or its letters as one string), in our
    chain's order; None: llama.cpp's default chain, which ours is."""
    value = body.get("samplers")
    if value is None:
        return None
    if isinstance(value, str):
        value = list(value)
    if not isinstance(value, list) or not all(isinstance(s, str) for s in value):
        raise BadRequest("'samplers' must be a list of sampler names", "samplers")
    chosen = []
    for raw in value:
        name = _ALIASES.get(raw.lower(), raw.lower())
        if name in _IDLE_SAMPLERS:
            continue
        if name not in _CHAIN:
            raise BadRequest(f"sampler '{raw}' is not supported here", "samplers")
        chosen.append(name)
    if chosen != sorted(chosen, key=_CHAIN.index):
        raise BadRequest(
            f"samplers run here in the order {', '.join(_CHAIN)}; ask for them in that order",
            "samplers",
        )
    return chosen


def _response_fields(body: v.JSON) -> list[str] | None:
    value = body.get("response_fields")
    if value is None or value == []:
        return None
    if not isinstance(value, list) or not all(isinstance(f, str) for f in value):
        raise BadRequest("'response_fields' must be a list of field names", "response_fields")
    return value


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
