"""Fill-in-the-middle: the prompt of a request with a suffix, built from the model's FIM tokens.

Every face builds it here: Ollama's /api/generate `suffix`, OpenAI's /v1/completions `suffix`
and llama.cpp's /infill. The prompt is

    [BOS] [extra files] PRE prefix [prompt] SUF suffix MID

with no chat template, the ids of `ModelInfo.fim` (what llama.cpp found in the GGUF), as
llama.cpp's server builds its infill prompt (tools/server `format_prompt_infill`); the answer is
the middle. The BOS comes first when the model adds one. Prefix, suffix and the other texts are
tokenized without special tokens added, as llama.cpp does; their special-token texts are still
parsed, as in every other prompt here (our one tokenizer call parses them).

Only /infill has the bracketed parts, as llama.cpp's does: `prompt` (text after the prefix) and
llama.cpp's repo-level header for the other files the editor sends (`input_extra`): its repo
token and "myproject", then each file under its file-separator token and name (a "--- snippet
---" line where the model has no separator token), then "filename" for the file being edited.
One difference, on purpose: llama.cpp writes those files before the BOS; we write the BOS first,
where the model saw it in training.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

from localserve.engine.worker_client.resident import ResidentModel
from localserve.ground.errors import BadRequest
from localserve.server.http import validation as v

# llama.cpp's texts for the repo-level header (its server names no project and no file).
_REPO = "myproject\n"
_FILE = "filename\n"
_SNIPPET = "\n\n--- snippet ---\n\n"


@dataclass(frozen=True)
class Fill:
    """What a request asks to fill: the text before and after the cursor, and /infill's extras."""

    prefix: str
    suffix: str
    prompt: str = ""
    # Other files' (name, text), written before the prefix with the repo-level tokens.
    extra: tuple[tuple[str, str], ...] = ()
    # Write llama.cpp's repo-level header (the /infill face does, as llama.cpp's server).
    repo_header: bool = False


@dataclass(frozen=True)
class FimPrompt:
    tokens: list[int]
    # Some of the prefix, suffix or extra files were left out so that the prompt fits.
    truncated: bool


def suffix_of(body: v.JSON, allowed: bool = True) -> str | None:
    """The request's `suffix`; an empty one is no fill-in-the-middle at all. Where a face takes
    none (chat), a suffix is refused rather than dropped."""
    suffix = v.string(body, "suffix") or None
    if suffix is not None and not allowed:
        raise BadRequest("'suffix' is for completions (/v1/completions), not chat", "suffix")
    return suffix


def ollama_fill(body: v.JSON) -> Fill | None:
    """/api/generate's prompt and suffix; None without a suffix. A template (of the request's or
    the model's) has no part in a FIM prompt, so one the request names is refused, not dropped."""
    suffix = suffix_of(body)
    if suffix is None:
        return None
    for field in ("template", "system"):
        if v.string(body, field):
            raise BadRequest(
                f"'{field}' cannot be combined with 'suffix': a fill-in-the-middle prompt is "
                "built from the model's FIM tokens, with no template",
                field,
            )
    return Fill(v.string(body, "prompt") or "", suffix)


def openai_fill(prompt: Any, suffix: str) -> Fill:
    """/v1/completions' prompt (one string) and suffix."""
    if isinstance(prompt, list) and len(prompt) == 1:
        prompt = prompt[0]
    if not isinstance(prompt, str):
        raise BadRequest("with a 'suffix', 'prompt' must be one string", "prompt")
    return Fill(prompt, suffix)


def fim_ids(model: ResidentModel, field: str = "suffix") -> tuple[int, int, int]:
    """The model's (prefix, suffix, middle) ids, or the 400 that names the request's field."""
    if model.info.fim is None:
        raise BadRequest(
            f"model '{model.name}' cannot fill in the middle: it has no FIM tokens "
            "(tokenizer.ggml.fim_pre/suf/mid_token_id, nor a known family's), so it takes no "
            f"'{field}'",
            field,
        )
    return model.info.fim


async def encode(
    model: ResidentModel, fill: Fill, window: int | None = None, field: str = "suffix"
) -> FimPrompt:
    """The FIM prompt's tokens. With a `window`, a prompt that would not fit it (prompt and
    answer) is cut to half of it, as Ollama's faces cut plain prompts (ollama_options.py), but
    keeping the code nearest the cursor; without one, a prompt too long is refused later, as
    any prompt is."""
    pre, suf, mid = fim_ids(model, field)
    rep, sep = model.info.fim_repo
    texts = [fill.prefix, fill.suffix, fill.prompt, _REPO, _FILE, _SNIPPET]
    for name, text in fill.extra:
        texts += [name + "\n", text]

    def tokenize() -> tuple[list[list[int]], list[int]]:
        pieces = model.runner.tokenize(texts, False)
        bos = model.runner.tokenize([""], True)[0][:1] if model.info.add_bos else []
        return pieces, bos

    # Long files take milliseconds to tokenize: off the event loop, in one trip.
    pieces, bos = await asyncio.get_running_loop().run_in_executor(None, tokenize)
    prefix, suffix, prompt, repo, file, snippet = pieces[:6]
    extra: list[int] = []
    if fill.repo_header:
        extra = [rep, *repo] if rep >= 0 else []
        for name_ids, text_ids in zip(pieces[6::2], pieces[7::2]):
            extra += [sep, *name_ids, *text_ids] if sep >= 0 else [*snippet, *text_ids]
        extra += [sep, *file] if sep >= 0 else []
    return assemble(bos, extra, (pre, suf, mid), prefix, suffix, prompt, window)


def assemble(
    bos: list[int],
    extra: list[int],
    ids: tuple[int, int, int],
    prefix: list[int],
    suffix: list[int],
    prompt: list[int],
    window: int | None,
) -> FimPrompt:
    """BOS, extra, PRE prefix prompt SUF suffix MID: within half the window if it must be cut,
    the prefix losing its start, the suffix its end, the extra files their oldest part."""
    pre, suf, mid = ids
    whole = len(bos) + len(extra) + 3 + len(prefix) + len(prompt) + len(suffix)
    truncated = False
    if window is not None and whole >= window:
        truncated = True
        budget = max(1, window // 2)
        room = max(0, budget - len(bos) - 3 - len(prompt))
        prefix, suffix = _fit(prefix, suffix, room)
        left = max(0, room - len(prefix) - len(suffix))
        extra = extra[len(extra) - left :] if left else []
    return FimPrompt([*bos, *extra, pre, *prefix, *prompt, suf, *suffix, mid], truncated)


def _fit(prefix: list[int], suffix: list[int], room: int) -> tuple[list[int], list[int]]:
    """Prefix and suffix within `room` tokens, nearest the cursor first: the suffix gets a
    quarter, or what the prefix leaves (llama.cpp splits them 3:1 too)."""
    if len(prefix) + len(suffix) <= room:
        return prefix, suffix
    n_suffix = min(len(suffix), max(room // 4, room - len(prefix)))
    n_prefix = room - n_suffix
    return prefix[len(prefix) - n_prefix :], suffix[:n_suffix]


def show_template(chat_template: str, tokens: tuple[str, str, str]) -> str:
    """/api/show's template for a model that fills: its chat template, then an Ollama
    Go-template section that says, with the model's own FIM token texts, what a request with a
    suffix is sent as. Continue offers fill-in-the-middle only for a model whose template
    mentions `.Suffix`, and this one truly takes a suffix."""
    pre, suf, mid = tokens
    section = (
        "{{- /* localserve: a request with a suffix is sent as this, without the chat "
        "template */ -}}\n"
        f"{{{{- if .Suffix }}}}{pre}{{{{ .Prompt }}}}{suf}{{{{ .Suffix }}}}{mid}{{{{- end }}}}"
    )
    return f"{chat_template}\n{section}" if chat_template else section
