"""llama.cpp's /infill request, declared once (server/wire/declare.py): its fields, llama.cpp's
defaults, and the sampler chain `samplers` names.

llama.cpp's fields that would change the answer and that we do not honour are a 400 naming them,
unless they hold llama.cpp's default (which changes nothing); unknown fields are ignored, as
llama.cpp ignores them.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from localserve.ground.errors import BadRequest
from localserve.ground.sampling import SamplingParams
from localserve.server.chat import fim
from localserve.server.http import validation as v
from localserve.server.llamacpp.infill_rules import LineRules
from localserve.server.wire import shapes
from localserve.server.wire.declare import Body, Field, boolean, integer, number, text
from localserve.server.wire.fields import KEEP_ALIVE, PRIORITY_FIELD, STOP_FIELD

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


def _idle(default: Any) -> Field:
    def read(body: v.JSON, key: str) -> None:
        value = body.get(key)
        if value is not None and value != default and value not in ([], {}):
            raise BadRequest(f"'{key}' is not supported by this server's /infill", key)

    doc = f"only llama.cpp's default, {default!r}: not honoured here"
    if default is None:
        return Field({"type": "null", "description": doc}, read)
    return Field(shapes.one_of({"const": default}, {"type": "null"}, description=doc), read)


def _seed(body: v.JSON, key: str) -> int | None:
    seed = v.integer(body, key, None, -1, (1 << 32) - 1)
    return None if seed is None or seed == -1 else seed


def _fill(body: v.JSON, _: str) -> fim.Fill:
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


def _samplers(body: v.JSON, _: str = "samplers") -> list[str] | None:
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


def _response_fields(body: v.JSON, _: str) -> list[str] | None:
    value = body.get("response_fields")
    if value is None or value == []:
        return None
    if not isinstance(value, list) or not all(isinstance(f, str) for f in value):
        raise BadRequest("'response_fields' must be a list of field names", "response_fields")
    return value


SAMPLERS = shapes.one_of(
    {"type": "string", "pattern": "^[ekpmitdysxEKPMITDYSX]*$"},
    shapes.array(
        {"enum": [*_CHAIN[:4], "infill", "temperature", "dry", "typ_p", "top_n_sigma", "xtc"]}
    ),
    {"type": "null"},
    description="in the order penalties, top_k, top_p, min_p, infill, temperature",
)
INFILL = Body(
    "InfillRequest",
    {
        **{key: _idle(default) for key, default in _IDLE_DEFAULTS.items()},
        "input_extra": Field(
            shapes.nullable(
                shapes.array(
                    shapes.obj({"filename": shapes.text(), "text": shapes.STRING}, ("text",))
                )
            ),
            _fill,
        ),
        "input_prefix": Field(shapes.STRING),  # read with input_extra, as the fill
        "input_suffix": Field(shapes.STRING),
        "prompt": Field(shapes.text("text after the prefix")),
        "n_predict": integer(-1, 1 << 30, -1, "0: only prefill"),
        "repeat_last_n": integer(-1, 1 << 20, 64),
        "temperature": number(0, 10, 0.8, to="temperature"),
        "top_k": integer(0, 1 << 20, 40, to="top_k"),
        "top_p": number(0, 1, 0.95, to="top_p"),
        "min_p": number(0, 1, 0.05, to="min_p"),
        "repeat_penalty": number(0, 10, 1, to="repeat_penalty"),
        "presence_penalty": number(-2, 2, 0, to="presence_penalty"),
        "frequency_penalty": number(-2, 2, 0, to="frequency_penalty"),
        "seed": Field(shapes.integer(-1, (1 << 32) - 1, -1), _seed, "seed"),
        "stop": STOP_FIELD,
        "ignore_eos": boolean(False, to="ignore_eos"),
        "samplers": Field(SAMPLERS, _samplers),
        "n_indent": integer(0, 1 << 20, 0),
        "t_max_predict_ms": integer(-1, 1 << 40, -1),
        "cache_prompt": boolean(True),
        "t_max_prompt_ms": integer(-1, 1 << 40, -1),
        "response_fields": Field(shapes.nullable(shapes.array(shapes.STRING)), _response_fields),
        "stream": boolean(False),
        "keep_alive": Field(KEEP_ALIVE),  # read as the model is held (infill.py)
        "model": text("the first loaded model when blank"),
        "priority": PRIORITY_FIELD,
    },
    ("input_prefix", "input_suffix"),
)


@dataclass(frozen=True)
class InfillRequest:
    fill: fim.Fill
    params: SamplingParams
    n_predict: int | None  # None: no cap; 0 asks only to prefill
    rules: LineRules
    fields: list[str] | None
    stream: bool
    model: str | None


def read_infill(body: v.JSON) -> InfillRequest:
    got = INFILL.read(body)
    last_n = got["repeat_last_n"]
    n_predict = got["n_predict"]
    params = INFILL.sampling(
        got,
        penalty_last_n=-1 if last_n is None else last_n,
        # 0 only prefills; the one token it costs is not sent.
        max_tokens=None if n_predict is None or n_predict < 0 else max(1, n_predict),
    )
    chosen = got["samplers"]
    if chosen is None:
        chosen = list(_CHAIN[:4]) + ["temperature"]  # llama.cpp's default chain, less infill
    if last_n == 0:  # llama.cpp: no tokens to look back over, no penalties
        chosen = [name for name in chosen if name != "penalties"]
    params = replace(
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
    return InfillRequest(
        got["input_extra"],
        params,
        n_predict,
        LineRules(got["n_indent"] or 0, got["t_max_predict_ms"] or -1),
        got["response_fields"],
        got["stream"],
        (got["model"] or "").strip() or None,
    )
