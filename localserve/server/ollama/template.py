"""The `template` field of Ollama's /api/generate: the part of Go's template language it uses.

Ollama's prompt templates are Go templates over `.System`, `.Prompt` and `.Response`, usually
with `{{ if .System }}...{{ end }}` around the system part. That subset is rendered here, with
Go's `{{-` and `-}}` whitespace trimming. Anything else (ranges over `.Messages`, functions)
is refused with a clear message rather than rendered wrongly.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import NamedTuple

from localserve.ground.errors import BadRequest

# Fixed text, no quantifier: matched whole against one stripped action.
_FIELD = re.compile(r"\.(System|Prompt|Response)")
_UNSUPPORTED = (
    "only {{ .System }}, {{ .Prompt }}, {{ .Response }} and {{ if .Field }}...{{ else }}..."
    "{{ end }} are supported in 'template'"
)


def render(template: str, system: str, prompt: str) -> str:
    values = {"System": system, "Prompt": prompt, "Response": ""}
    out: list[str] = []
    # Each open `if` records whether its branch is being written and whether an outer one is.
    stack: list[tuple[bool, bool]] = []
    writing = True
    pos = 0
    # Whether the last action ended "-}}": the text after it, up to the next action, is trimmed
    # then (trimming the whole rest of the template at each "-}}" was quadratic).
    trim = False
    for a in _actions(template):
        text = template[pos : a.start]
        if trim:
            text = text.lstrip()
        if a.trim_before:
            text = text.rstrip()
        if writing:
            out.append(text)
        pos, trim = a.end, a.trim_after
        action = a.text
        if action.startswith("if "):
            field = _field(action[3:])
            stack.append((writing, bool(values[field])))
            writing = writing and bool(values[field])
        elif action == "else" and stack:
            outer, taken = stack[-1]
            writing = outer and not taken
        elif action == "end" and stack:
            writing = stack.pop()[0]
        else:
            field = _field(action)
            if writing:
                out.append(values[field])
    if stack:
        raise BadRequest("'template' has an {{ if }} without its {{ end }}", "template")
    if writing:
        out.append(template[pos:].lstrip() if trim else template[pos:])
    return "".join(out)


class _Action(NamedTuple):
    start: int  # of its "{{"
    end: int  # past its "}}"
    text: str  # between them, trimmed
    trim_before: bool  # "{{- "
    trim_after: bool  # " -}}"


def _actions(template: str) -> Iterator[_Action]:
    """Each `{{ ... }}` in order, as Go reads them: an action ends at the first "}}" after its
    "{{", and a "{{" with no "}}" after it is text. Found with str.find and read with strip, so
    the work is linear in the template: the regex this replaces, with a lazy run between two
    runs of spaces, took cubic time on a "{{" and spaces (1,600 held the event loop for 27 s)."""
    start = template.find("{{")
    while start >= 0:
        close = template.find("}}", start + 2)
        if close < 0:
            return
        inner = template[start + 2 : close]
        # The marks need their space: "{{-3}}" is an action of "-3", as in Go.
        trim_before = inner[:1] == "-" and inner[1:2].isspace()
        body = (inner[2:] if trim_before else inner).lstrip()
        trim_after = body[-1:] == "-" and body[-2:-1].isspace()
        body = (body[:-1] if trim_after else body).rstrip()
        yield _Action(start, close + 2, body, trim_before, trim_after)
        start = template.find("{{", close + 2)


def _field(expr: str) -> str:
    m = _FIELD.fullmatch(expr.strip())
    if m is None:
        raise BadRequest(_UNSUPPORTED, "template")
    return m.group(1)
