"""The `template` field of Ollama's /api/generate: the part of Go's template language it uses.

Ollama's prompt templates are Go templates over `.System`, `.Prompt` and `.Response`, usually
with `{{ if .System }}...{{ end }}` around the system part. That subset is rendered here, with
Go's `{{-` and `-}}` whitespace trimming. Anything else (ranges over `.Messages`, functions)
is refused with a clear message rather than rendered wrongly.
"""

from __future__ import annotations

import re

from localserve.ground.errors import BadRequest

_ACTION = re.compile(r"\{\{(-\s)?\s*(.*?)\s*(\s-)?\}\}", re.S)
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
    for m in _ACTION.finditer(template):
        text = template[pos : m.start()]
        if m.group(1):
            text = text.rstrip()
        if writing:
            out.append(text)
        pos = m.end()
        if m.group(3):
            rest = template[pos:]
            pos += len(rest) - len(rest.lstrip())
        action = m.group(2)
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
        out.append(template[pos:])
    return "".join(out)


def _field(expr: str) -> str:
    m = _FIELD.fullmatch(expr.strip())
    if m is None:
        raise BadRequest(_UNSUPPORTED, "template")
    return m.group(1)
