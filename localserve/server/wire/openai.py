"""OpenAI's request bodies, declared once: /v1/chat/completions, /v1/completions and
/v1/embeddings. Their sampling fields are OpenAI's, with llama.cpp's top_k, min_p and
repeat_penalty."""

from __future__ import annotations

from typing import Any

from localserve.ground.errors import BadRequest
from localserve.server.chat import fim, structured
from localserve.server.chat.plan import template_kwargs
from localserve.server.chat.tool_calls import read_tools
from localserve.server.http import validation as v
from localserve.server.http.readers import chat_messages
from localserve.server.wire import shapes
from localserve.server.wire.declare import Body, Field, boolean, integer, nested, number
from localserve.server.wire.fields import (
    EFFORT,
    ENGINE_LACKS,
    KEEP_ALIVE_FIELD,
    MESSAGES,
    MODEL_FIELD,
    OUTPUT_CAP,
    PRIORITY_FIELD,
    RESPONSE_FORMAT,
    SEED,
    SPECULATIVE_FIELD,
    STOP_FIELD,
    TEMPLATE_KWARGS,
    TOKEN_IDS,
    TOOL_CHOICE,
    TOOLS,
)
from localserve.server.wire.shapes import STRING

JSON = dict[str, Any]


def _refuse_logprobs(none: object) -> Field:
    """Token log-probabilities are not computed here: asking for them is a 400, not an answer
    that leaves them out. `logprobs: false` and `top_logprobs: 0` ask for none."""

    def read(body: JSON, key: str) -> None:
        value = body.get(key)
        if value is not None and not (value == none and type(value) is type(none)):
            raise BadRequest(
                f"'{key}' is not supported: this server does not return token log-probabilities",
                key,
            )

    return Field(shapes.nullable({"const": none, "description": "only none are returned"}), read)


def _logit_bias(body: JSON, key: str) -> tuple[tuple[int, float], ...]:
    """OpenAI's `{"token id": bias}`, each bias in -100..100 (-100 bans the token); the ids are
    checked against the model's vocabulary once it is known (turn/local.py's check_room)."""
    value = body.get(key)
    if value is None:
        return ()
    if not isinstance(value, dict):
        raise BadRequest("'logit_bias' must be an object of token ids to biases", key)
    out = []
    for token_id, bias in value.items():
        try:
            token = int(token_id)
        except ValueError:
            raise BadRequest(f"'logit_bias' key {token_id!r} is not a token id", key) from None
        if isinstance(bias, bool) or not isinstance(bias, (int, float)) or not -100 <= bias <= 100:
            raise BadRequest(
                f"'logit_bias' for token {token_id} must be a number in -100..100", key
            )
        out.append((token, float(bias)))
    return tuple(out)


def _min_p(body: JSON, key: str) -> float | None:
    # Absent, the server's default (ONNX's Engine has no min-p: one named there is refused).
    return v.number(body, key, None, 0.0, 1.0)


LOGIT_BIAS = shapes.nullable(
    {
        "type": "object",
        "propertyNames": {"pattern": "^[0-9]+$"},
        "additionalProperties": {"type": "number", "minimum": -100, "maximum": 100},
        "description": "a bias for each token id (below the vocabulary size); -100 bans it",
    }
)
STREAM_OPTIONS = Body("StreamOptions", {"include_usage": boolean(False)})
SAMPLING = {
    "stream": boolean(False),
    "stream_options": nested(STREAM_OPTIONS),
    "n": integer(1, 1, 1, "only 1"),
    "logprobs": _refuse_logprobs(False),
    "top_logprobs": _refuse_logprobs(0),
    # The newer name first: it wins where both are given.
    "max_completion_tokens": integer(
        1, 1 << 30, doc="max_tokens' newer name, which wins", to="max_tokens"
    ),
    "max_tokens": integer(1, 1 << 30, doc=OUTPUT_CAP, to="max_tokens"),
    "stop": STOP_FIELD,
    "temperature": number(0, 2, 0.8, to="temperature"),
    "top_p": number(0, 1, 0.95, to="top_p"),
    "top_k": integer(0, 1 << 20, 40, to="top_k"),
    "min_p": Field(shapes.number(0, 1, 0.05, ENGINE_LACKS), _min_p, "min_p"),
    "presence_penalty": number(-2, 2, 0, ENGINE_LACKS, to="presence_penalty"),
    "frequency_penalty": number(-2, 2, 0, ENGINE_LACKS, to="frequency_penalty"),
    "repeat_penalty": number(0, 10, 1, to="repeat_penalty"),
    "seed": integer(*SEED, doc=f"{ENGINE_LACKS}, unless greedy or batched dynamically", to="seed"),
    "logit_bias": Field(LOGIT_BIAS, _logit_bias, "logit_bias"),
    "response_format": Field(
        RESPONSE_FORMAT, lambda body, _: structured.from_response_format(body), "grammar"
    ),
    "speculative": SPECULATIVE_FIELD,
    "keep_alive": KEEP_ALIVE_FIELD,
    "priority": PRIORITY_FIELD,
}
CHAT_COMPLETION = Body(
    "ChatCompletionRequest",
    {
        "model": MODEL_FIELD,
        **SAMPLING,
        "suffix": Field(
            shapes.nullable({"const": "", "description": "for /v1/completions, not chat"}),
            lambda body, _: fim.suffix_of(body, allowed=False),
        ),
        "messages": Field(MESSAGES, lambda body, _: chat_messages(body)),
        "tools": Field(TOOLS, lambda body, _: read_tools(body)),
        "tool_choice": Field(TOOL_CHOICE),  # read with the tools
        "parallel_tool_calls": Field(shapes.boolean(True)),  # read with the tools
        "chat_template_kwargs": Field(TEMPLATE_KWARGS, lambda body, _: template_kwargs(body)),
        "reasoning_effort": Field(
            {
                **EFFORT,
                "description": f"{EFFORT['description']}; a level other than none is a 400 "
                "with a model that does not think",
            }
        ),  # read with the chat template's thinking (chat/plan.py's read_effort)
    },
    ("model", "messages"),
)
COMPLETION = Body(
    "CompletionRequest",
    {
        "model": MODEL_FIELD,
        **SAMPLING,
        "prompt": Field(
            shapes.one_of(STRING, shapes.array(STRING, minItems=1, maxItems=1), TOKEN_IDS)
        ),  # read as the model tokenizes it (openai/completions.py)
        "suffix": Field(
            shapes.text("fill in the middle between prompt and suffix (a model with FIM tokens)"),
            lambda body, _: fim.suffix_of(body),
        ),
        "echo": boolean(False, "the answer's text starts with the prompt's (a text prompt)"),
    },
    ("model", "prompt"),
)
