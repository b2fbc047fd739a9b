"""Ollama's /api/chat and /api/generate as Chat Completions, and the answers back. Pure: no
HTTP here, so the unit tests read every mapping.

What has no Chat Completions field is refused with a 400 naming it, never dropped: an answer
that silently ignored `num_gpu` or `mirostat` would not be the one asked for.
"""

from __future__ import annotations

import json
from typing import Any

from localserve.ground.errors import BadRequest

JSON = dict[str, Any]

# Ollama option -> Chat Completions field. top_k and min_p are not OpenAI's, but vLLM, SGLang
# and llama.cpp's servers all take them under these names.
OPTIONS = {
    "temperature": "temperature",
    "top_p": "top_p",
    "top_k": "top_k",
    "min_p": "min_p",
    "seed": "seed",
    "stop": "stop",
    "presence_penalty": "presence_penalty",
    "frequency_penalty": "frequency_penalty",
}
# Fields of the request itself that only a local model can honour.
_LOCAL_ONLY = ("images", "raw", "template", "suffix", "context", "think")


def _refuse(name: str, where: str, upstream: str) -> BadRequest:
    return BadRequest(
        f"'{name}' has no equivalent on upstream '{upstream}' (an OpenAI-compatible server): "
        f"leave it out of {where}",
        name,
    )


def options(opts: Any, upstream: str, context_length: int | None) -> JSON:
    """Ollama's `options` as Chat Completions fields; one without a field is a 400."""
    if opts is None:
        return {}
    if not isinstance(opts, dict):
        raise BadRequest("'options' must be an object", "options")
    out: JSON = {}
    for name, value in opts.items():
        if value is None:
            continue
        if name in OPTIONS:
            out[OPTIONS[name]] = value
        elif name == "num_predict":
            if not isinstance(value, int) or isinstance(value, bool):
                raise BadRequest("'num_predict' must be a whole number", "num_predict")
            if value >= 0:  # -1 and -2: no cap of the request's own
                out["max_tokens"] = max(1, value)
        elif name == "num_ctx":
            # The upstream's window is what holds; a request may ask for no more than it.
            if context_length is not None and isinstance(value, int) and value > context_length:
                raise BadRequest(
                    f"num_ctx {value} is larger than the context of this model on upstream "
                    f"'{upstream}' ({context_length} tokens)",
                    "num_ctx",
                )
        else:
            raise _refuse(name, "'options'", upstream)
    return out


def response_format(fmt: Any) -> JSON | None:
    """Ollama's `format`: "json", or a JSON schema."""
    if fmt is None or fmt == "":
        return None
    if fmt == "json":
        return {"type": "json_object"}
    if isinstance(fmt, dict):
        return {"type": "json_schema", "json_schema": {"name": "answer", "schema": fmt}}
    raise BadRequest("'format' must be \"json\" or a JSON schema", "format")


def messages(msgs: Any) -> list[JSON]:
    """Ollama's messages as OpenAI's: a call's arguments as JSON text, with ids that the tool
    messages answering them refer to (Ollama's carry none, only the tool's name, if that)."""
    if not isinstance(msgs, list) or not msgs:
        raise BadRequest("'messages' must be a non-empty list", "messages")
    out: list[JSON] = []
    pending: list[tuple[str, str]] = []  # (id, name) of calls not answered yet
    for i, m in enumerate(msgs):
        if not isinstance(m, dict) or not isinstance(m.get("role"), str):
            raise BadRequest(f"messages[{i}] must be an object with a string 'role'", "messages")
        if m.get("images"):
            raise BadRequest("images are not forwarded to upstreams", "images")
        role, content = m["role"], m.get("content") or ""
        one: JSON = {"role": role, "content": content}
        if role == "assistant" and m.get("tool_calls"):
            calls = []
            for j, call in enumerate(m["tool_calls"]):
                fn = call.get("function", {}) if isinstance(call, dict) else {}
                args = fn.get("arguments", {})
                call_id = call.get("id") or f"call_{i}_{j}"
                pending.append((call_id, str(fn.get("name", ""))))
                calls.append(
                    {
                        "id": call_id,
                        "type": "function",
                        "function": {
                            "name": fn.get("name", ""),
                            "arguments": args if isinstance(args, str) else json.dumps(args),
                        },
                    }
                )
            # Content stays "" (not null): llama-cpp-python's server refuses a null content.
            one["tool_calls"] = calls
        elif role == "tool":
            name = m.get("tool_name") or m.get("name")
            match = next((p for p in pending if name and p[1] == name), None)
            match = match or (pending[0] if pending else None)
            if match is not None:
                pending.remove(match)
                one["tool_call_id"] = match[0]
            else:
                one["tool_call_id"] = m.get("tool_call_id") or f"call_{i}"
        out.append(one)
    return out


def chat_request(body: JSON, model: str, upstream: str, context_length: int | None) -> JSON:
    """/api/chat's body as a Chat Completions request to `model` on `upstream`."""
    return _request(body, messages(body.get("messages")), model, upstream, context_length)


def generate_request(body: JSON, model: str, upstream: str, context_length: int | None) -> JSON:
    """/api/generate's body (a prompt and a system message) as a Chat Completions request."""
    prompt = body.get("prompt")
    if not isinstance(prompt, str) or not prompt:
        raise BadRequest("'prompt' is required for an upstream model", "prompt")
    msgs: list[JSON] = []
    if isinstance(body.get("system"), str) and body["system"]:
        msgs.append({"role": "system", "content": body["system"]})
    msgs.append({"role": "user", "content": prompt})
    if body.get("tools"):
        raise BadRequest("'tools' are taken by /api/chat, not /api/generate", "tools")
    return _request(body, msgs, model, upstream, context_length)


def _request(
    body: JSON, msgs: list[JSON], model: str, upstream: str, context_length: int | None
) -> JSON:
    for name in _LOCAL_ONLY:
        if body.get(name) not in (None, False, "", []):
            raise _refuse(name, "the request", upstream)
    stream = body.get("stream", True) is not False
    out: JSON = {"model": model, "messages": msgs, "stream": stream}
    if stream:
        out["stream_options"] = {"include_usage": True}
    out.update(options(body.get("options"), upstream, context_length))
    fmt = response_format(body.get("format"))
    if fmt is not None:
        out["response_format"] = fmt
    if body.get("tools"):
        out["tools"] = body["tools"]
    return out


def embed_request(body: JSON, model: str, upstream: str) -> JSON:
    """/api/embed's body as an Embeddings request. `truncate` has no field there: an input
    longer than the model's context gets the upstream's own error, whichever it asks."""
    texts = body.get("input")
    if isinstance(texts, str):
        texts = [texts]
    if not isinstance(texts, list) or not all(isinstance(t, str) for t in texts) or not texts:
        raise BadRequest("'input' must be a string or a non-empty list of strings", "input")
    out: JSON = {"model": model, "input": texts, "encoding_format": "float"}
    if body.get("dimensions") is not None:
        out["dimensions"] = body["dimensions"]
    options(body.get("options"), upstream, None)  # refuses what has no field; none applies
    return out


# -- the answers --------------------------------------------------------------------------------
