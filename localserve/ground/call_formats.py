"""How a model writes a tool call, by the family its chat template belongs to.

Every family writes calls as JSON objects `{"name": ..., "<args key>": {...}}` between an
opening, a separator and a closing text; `auto` calls start at the `trigger`. A template that
renders `tools` itself and names one of these families is served natively (the model was tuned
on that format); any other model gets the generic prompt of server/chat/tool_calls.py and the
generic format, as llama.cpp's server does for templates without tool support.
"""

from __future__ import annotations

from dataclasses import dataclass

NAME_KEY = '{"name": '


@dataclass(frozen=True)
class CallFormat:
    family: str
    open: str  # before the first call
    sep: str  # between two calls
    close: str  # after the last call
    args_key: str  # "arguments", or Llama 3's "parameters"
    trigger: str  # where a call starts: a prefix of `open + NAME_KEY`
    native: bool = True  # the template renders the tools and their results itself

    @property
    def first(self) -> str:
        """The text from the trigger on, up to the first call's name."""
        return self.open + NAME_KEY


HERMES = CallFormat(
    "hermes",
    "<tool_call>\n",
    "\n</tool_call>\n<tool_call>\n",
    "\n</tool_call>",
    "arguments",
    "<tool_call>",
)
MISTRAL = CallFormat("mistral", "[TOOL_CALLS][", ", ", "]", "arguments", "[TOOL_CALLS]")
LLAMA3 = CallFormat("llama3", "", "\n", "", "parameters", '{"name"')
GENERIC = CallFormat(
    "generic", '{"tool_calls": [', ", ", "]}", "arguments", '{"tool_calls"', native=False
)


def call_format(template: str | None) -> CallFormat:
    """The family of a chat template, by the markers its source writes; GENERIC when it does
    not render tools or writes calls in a format not listed here."""
    if not template or "tools" not in template:
        return GENERIC
    if "[TOOL_CALLS]" in template:
        return MISTRAL
    if "<tool_call>" in template:
        return HERMES
    if "<|start_header_id|>" in template and (
        '"parameters"' in template or "<|python_tag|>" in template
    ):
        return LLAMA3
    return GENERIC


def thinks(template: str | None) -> bool:
    """A template that writes or strips `<think>` blocks belongs to a reasoning model."""
    return bool(template) and "<think>" in template and "</think>" in template  # type: ignore[operator]
