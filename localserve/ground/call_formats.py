"""How a model writes a tool call and its reasoning: the texts around each part, as its chat
template renders them (formats/call_syntax.py reads them off the template).

A call block is `open`, then calls joined by `sep`, then `close`. A call is `call_open`, the
function's name, `name_close`, its arguments, then `call_close`. The arguments are either one
JSON object (`args == "json"`: Hermes, Llama 3, Mistral, DeepSeek, Kimi, gpt-oss) or one
parameter after another (`args == "params"`: Qwen3-Coder and Qwen3.5, GLM, MiniMax, Gemma 4),
each `param_open`, its key, `param_mid`, its value, `param_close`, joined by `param_sep`; a
string value is written as it is, any other as JSON, with the `*_other` texts where the template
marks the type (DeepSeek's `string="false"`). The texts may hold an id or index slot (Mistral's
`[CALL_ID]`, Kimi's `functions.NAME:0`), written here as ID_SLOT and INDEX_SLOT.

A model whose template renders no tools gets GENERIC, the JSON the generic prompt of
server/chat/tool_calls.py asks for.
"""

from __future__ import annotations

from dataclasses import dataclass

# Control characters, which no template's text holds: the places an id or an index is written.
ID_SLOT = "\x01"
INDEX_SLOT = "\x02"
SLOTS = ID_SLOT + INDEX_SLOT


@dataclass(frozen=True)
class Reasoning:
    """The texts that open and close a reasoning model's thinking block: `close_text` as the
    template writes it, blank lines included; `quiet`, markers around the answer that carry no
    text of it (harmony's channel headers), dropped from the content."""

    open: str
    close: str
    close_text: str
    quiet: tuple[str, ...] = ()


@dataclass(frozen=True)
class CallFormat:
    family: str  # "derived", "generic", or a named family's name
    open: str
    call_open: str
    name_close: str
    call_close: str
    sep: str
    close: str
    args: str = "json"  # "json" or "params"
    param_open: str = ""
    param_mid: str = ""
    param_close: str = ""
    param_sep: str = ""
    param_mid_other: str = ""
    param_close_other: str = ""
    # What an answer that calls at once writes before the calls, as the template renders a
    # call: `lead_open` where the prompt ends in an open reasoning block (it closes it),
    # `lead_fresh` where it does not (Qwen3's empty `<think>\n\n</think>\n\n`).
    lead_open: str = ""
    lead_fresh: str = ""
    parallel: bool = True  # the template renders more than one call in a turn
    lists_tools: bool = True  # the template lists the tools (DeepSeek V3.1's leaves it to us)
    native: bool = True  # the template renders the tools and their results itself

    @property
    def first(self) -> str:
        """The text a call block begins with, up to the first call's name."""
        return self.open + self.call_open

    @property
    def trigger(self) -> str:
        """Where a call starts in a free answer: the block's first marker (`<tool_call>`,
        `[TOOL_CALLS]`), or its literal text up to the first slot or name."""
        text = self.first
        for slot in SLOTS:
            text = text.split(slot, 1)[0]
        core = text.lstrip()
        for end in (">", "]"):
            at = core.find(end)
            if 0 < at < len(core) - 1 and core[0] in "<[":
                return core[: at + 1]
        return core or text


GENERIC = CallFormat(
    "generic",
    open='{"tool_calls": [',
    call_open='{"name": "',
    name_close='", "arguments": ',
    call_close="}",
    sep=", ",
    close="]}",
    native=False,
)
