"""A chat template's own syntax for tool calls and reasoning, read off the template itself.

The template is rendered with known probes and the renderings compared, as llama.cpp's
auto-parser does (common/chat-diff-analyzer.cpp): a turn with one call and a turn with two give
the texts around a call, its name and its arguments, and between two calls; a turn with a known
thought gives the texts around reasoning. The comparisons are by character, so a text may be
cut at another place than the template's author would (`</parameter` and `>\\n</function>`):
every rendering the format writes is still the template's, character for character.

A template that renders no tools, or whose calls cannot be read this way, gets GENERIC.
"""

from __future__ import annotations

import json
import logging
from dataclasses import replace
from functools import lru_cache
from typing import Any

from localserve.formats.chat_template import ChatTemplate
from localserve.formats.render_diff import (
    begins_marker,
    boundary,
    boundary_after,
    ends_marker,
    first_marker,
    fits,
    last_marker,
    prefix,
    same,
    suffix,
)
from localserve.ground.call_formats import GENERIC, ID_SLOT, CallFormat, Reasoning

log = logging.getLogger(__name__)

USER = "PROBE_USER_TEXT"
TEXT = "PROBE_ANSWER_TEXT"
THOUGHT = "PROBE_THOUGHT_TEXT"
ALPHA, BETA = "fn_alpha", "fn_beta"
ID_ONE, ID_TWO = "qZ7xW3kP9", "rY8vU4jN2"  # Mistral's templates insist on 9 alphanumerics
ARGS_ONE = {"arg_one": "val_one", "arg_two": "val_two"}
NUMBER = 7317
ARGS_TWO = {"arg_first": NUMBER, "arg_second": "val_four"}  # sorted, as Gemma 4 sorts them
# gpt-oss's harmony format, the one family named here: its thought is a message on the
# analysis channel, ended by `<|end|>`; the answer, another message on the final channel (or a
# call on the commentary channel), whose header carries no text. A rendered thought shows the
# final channel's header as the close, which a turn of calls never writes.
HARMONY_MARKERS = ("<|channel|>", "<|message|>", "<|start|>", "<|end|>")
HARMONY = Reasoning(
    "<|channel|>analysis<|message|>",
    "<|end|>",
    "<|end|>",
    quiet=(
        "<|start|>assistant",
        "<|channel|>final<|message|>",
        "<|channel|>commentary",
        "<|return|>",
    ),
)
_KEYS = ("reasoning_content", "thinking", "reasoning")  # where templates read a turn's thought
# Templates that keep no thought of a past turn (DeepSeek R1's strip them, Gemma 4's drop them):
# their markers, named, where the template's source writes them.
_NAMED_REASONING = (
    ("<think>", "</think>", "\n</think>\n\n"),
    ("<|channel>thought", "<channel|>", "<channel|>"),
)


def tool(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """A probe function whose parameters are typed as `arguments`' values are."""
    properties = {
        key: {"type": "string" if isinstance(value, str) else "integer", "description": key}
        for key, value in arguments.items()
    }
    parameters = {"type": "object", "properties": properties, "required": list(arguments)}
    return {
        "type": "function",
        "function": {"name": name, "description": "A probe.", "parameters": parameters},
    }


def call(call_id: str, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


TOOLS = [tool(ALPHA, ARGS_ONE), tool(BETA, ARGS_TWO)]
_CALL_ONE = call(ID_ONE, ALPHA, ARGS_ONE)
_ASK = [{"role": "user", "content": USER}]


@lru_cache(maxsize=64)
def syntax_of(source: str | None) -> tuple[CallFormat, Reasoning | None]:
    """The call format and the reasoning markers of a template source, read once per source."""
    if not source:
        return GENERIC, None
    try:
        template = ChatTemplate(source, "", "")
    except Exception:  # a template that does not compile: each chat says so (server/chat)
        return GENERIC, None
    read = read_reasoning(template)
    reasoning, key = read if read is not None else (None, "")
    if all(marker in source for marker in HARMONY_MARKERS):
        reasoning = HARMONY
    fmt = GENERIC
    if "tool" in source:
        try:
            fmt = read_calls(template, reasoning, key) or GENERIC
            if any(len(text) > _LONGEST for text in _texts(fmt)):
                fmt = GENERIC  # a reading that took in the template's prose (Command R+'s)
        except Exception as exc:  # the template's own code failed on the probes
            log.debug("the template's calls could not be read: %s", exc)
    return fmt, reasoning


# The longest text around a call any template of the corpus writes is 53 characters (GigaChat's
# call opening); a longer one is prose the reading took in, not a call's markup.
_LONGEST = 80


def _texts(fmt: CallFormat) -> tuple[str, ...]:
    return (
        fmt.open,
        fmt.call_open,
        fmt.name_close,
        fmt.call_close,
        fmt.sep,
        fmt.close,
        fmt.param_open,
        fmt.param_mid,
        fmt.param_close,
        fmt.param_sep,
    )


def _render(template: ChatTemplate, turn: dict[str, Any] | None, **variables: Any) -> str:
    messages = _ASK if turn is None else [*_ASK, turn]
    return template.render_raw(messages, turn is None, **variables)


# -- reasoning ---------------------------------------------------------------------------------


def read_reasoning(template: ChatTemplate) -> tuple[Reasoning, str] | None:
    """The thinking block's markers, from a turn with a thought rendered, and the message key
    the template reads the thought from; `<think>` where the template keeps no thought of a
    turn (DeepSeek R1's strip them). The close is what a thought ends with both before text and
    before calls (Cohere writes `<|START_TEXT|>` after one, `<|START_ACTION|>` after the other)."""
    for key in _KEYS:
        turn = {"role": "assistant", "content": TEXT, key: THOUGHT}
        try:
            text = _render(template, turn)
            prompt = _render(template, None)
        except Exception:
            continue
        at, answer = text.find(THOUGHT), text.find(TEXT)
        if at < 0 or answer < at:
            continue
        close_text = text[at + len(THOUGHT) : answer]
        start = (
            len(prompt) if text.startswith(prompt) else boundary(text, len(prefix(prompt, text)))
        )
        opening = text[start:at].strip() or last_marker(text[:at])
        close = ends_marker(prefix(close_text, _after_thought(template, key) or close_text))
        if close.strip() and opening:
            return Reasoning(opening, close.strip(), close_text), key
    source = template.source
    for opening, close, close_text in _NAMED_REASONING:
        if opening in source and close in source:
            return Reasoning(opening, close, close_text), ""
    return None


def _after_thought(template: ChatTemplate, key: str) -> str:
    """What a turn of one call writes between its thought and the call's name; "" where the
    template drops the thought of a turn of calls."""
    turn = {"role": "assistant", "content": "", key: THOUGHT, "tool_calls": [_CALL_ONE]}
    try:
        text = _render(template, turn, tools=TOOLS)
    except Exception:
        return ""
    at = text.find(THOUGHT)
    name = text.find(ALPHA, at)
    return text[at + len(THOUGHT) : name] if at >= 0 and name > at else ""


def read_calls(
    template: ChatTemplate, reasoning: Reasoning | None, key: str = ""
) -> CallFormat | None:
    """The call format from a turn with one call and a turn with two; None where the
    renderings do not show a call this reading understands. A template that refuses two calls
    in a turn (Llama 3's) gets a format of one call."""
    prompt = _render(template, None, tools=TOOLS)
    calls = [call(ID_ONE, ALPHA, ARGS_ONE), call(ID_TWO, BETA, ARGS_TWO)]
    turn = {"role": "assistant", "content": ""}
    one = _render(template, {**turn, "tool_calls": calls[:1]}, tools=TOOLS).replace(ID_ONE, ID_SLOT)
    try:
        two = _render(template, {**turn, "tool_calls": calls}, tools=TOOLS)
    except Exception:
        two = None
    answer = _render(template, {**turn, "content": TEXT}, tools=TOOLS)
    if USER not in one or TEXT not in answer:
        return None
    start = len(prompt) if one.startswith(prompt) else boundary(one, len(prefix(prompt, one)))
    name_one = one.find(ALPHA, start)
    if name_one < 0:
        return None
    end_of_turn = answer[answer.find(TEXT) + len(TEXT) :]
    if two is None or BETA not in two[name_one:]:  # one call a turn (Llama 3, gpt-oss)
        return _single_call(one, start, name_one, end_of_turn, reasoning, prompt)
    two = two.replace(ID_ONE, ID_SLOT).replace(ID_TWO, ID_SLOT)
    name_two = two.find(BETA, name_one)
    if one[:name_one] != two[:name_one]:
        return None
    args = _json_args(one, two, name_one, name_two) or _param_args(one, two, name_one, name_two)
    if args is None:
        return None
    partial, end_one = args
    if one[:end_one] != two[:end_one]:
        return None
    before, between, after = one[start:name_one], two[end_one:name_two], one[end_one:]
    call_open = begins_marker(suffix(before, between), between)
    call_close = ends_marker(prefix(between, after)[: len(between) - len(call_open)])
    sep = between[len(call_close) : len(between) - len(call_open)]
    lead, block_open = _split_lead(before[: len(before) - len(call_open)], reasoning)
    lead_open, lead_fresh = _leads(lead, reasoning, prompt)
    if reasoning is not None and key and reasoning.close not in lead:
        # As the template writes it after a thought (MiniMax adds a blank line before calls).
        between_thought = _after_thought(template, key)
        first = block_open + call_open
        cut = len(between_thought) - len(first)
        if reasoning.close in between_thought and fits(between_thought[cut:], first):
            lead_open = between_thought[:cut]
    return replace(
        partial,
        open=block_open,
        call_open=call_open,
        call_close=call_close,
        sep=sep,
        close=_block_close(after[len(call_close) :], end_of_turn),
        lead_open=lead_open,
        lead_fresh=lead_fresh,
        lists_tools=ALPHA in prompt,
    )


def _single_call(
    one: str,
    start: int,
    name_one: int,
    end_of_turn: str,
    reasoning: Reasoning | None,
    prompt: str,
) -> CallFormat | None:
    args = _json_args(one, one, name_one, name_one, single=True)
    if args is None:
        return None
    partial, end_one = args
    lead, call_open = _split_lead(one[start:name_one], reasoning)
    lead_open, lead_fresh = _leads(lead, reasoning, prompt)
    return replace(
        partial,
        call_open=call_open,
        call_close=_block_close(one[end_one:], end_of_turn),
        parallel=False,
        lead_open=lead_open,
        lead_fresh=lead_fresh,
        lists_tools=ALPHA in prompt,
    )


def _leads(lead: str, reasoning: Reasoning | None, prompt: str) -> tuple[str, str]:
    """What an answer that calls at once writes first, after a prompt that opens a reasoning
    block (it closes it) and after one that does not (as the template renders a call)."""
    if reasoning is None:
        return "", lead
    opens = prompt.rstrip().endswith(reasoning.open)
    return (lead if reasoning.close in lead else reasoning.close_text), ("" if opens else lead)


def _block_close(rest: str, end_of_turn: str) -> str:
    """The text after the last call, before the turn's end (the first marker a turn of text
    ends with: the model stops there)."""
    marker = first_marker(end_of_turn)
    if marker and marker in rest:
        close = rest[: rest.index(marker)]
    elif rest.endswith(end_of_turn):
        close = rest[: len(rest) - len(end_of_turn)]
    else:  # the template ends a turn of calls otherwise (gpt-oss's `<|call|>`)
        close = rest[: boundary_after(rest, len(rest) - len(suffix(rest, end_of_turn)))]
    # Blank space before the turn's end is no part of the calls: the model stops after them.
    return close.rstrip()


def _json_args(
    one: str, two: str, name_one: int, name_two: int, single: bool = False
) -> tuple[CallFormat, int] | None:
    first, second = json.dumps(ARGS_ONE), json.dumps(ARGS_TWO)
    at_one = one.find(first, name_one)
    if at_one < 0:
        return None
    name_close: str | None = one[name_one + len(ALPHA) : at_one]
    if not single:
        at_two = two.find(second, name_two)
        if at_two < 0:
            return None
        name_close = same(name_close or "", two[name_two + len(BETA) : at_two])
    if name_close is None:
        return None
    return _partial(name_close), at_one + len(first)


def _param_args(one: str, two: str, name_one: int, name_two: int) -> tuple[CallFormat, int] | None:
    """Arguments written one parameter at a time: the texts around each key and value, for a
    string value (call one's) and any other (call two's first)."""
    found_one = _find_all(one, name_one, ["arg_one", "val_one", "arg_two", "val_two"])
    found_two = _find_all(two, name_two, ["arg_first", str(NUMBER), "arg_second", "val_four"])
    if found_one is None or found_two is None:
        return None
    k1, v1, k2, v2 = found_one
    k3, v3, k4, v4 = found_two
    mid = one[k1 + len("arg_one") : v1]
    if one[k2 + len("arg_two") : v2] != mid or two[k4 + len("arg_second") : v4] != mid:
        return None
    to_first, between = one[name_one + len(ALPHA) : k1], one[v1 + len("val_one") : k2]
    name_and_open = same(to_first, two[name_two + len(BETA) : k3])
    # Blank space before a parameter stays its own (`\n<parameter=`): then a call of no
    # parameters is written `<function=NAME>\n</function>`, as the template writes it.
    param_open = begins_marker(suffix(to_first, between), between, keep_space=True)
    tail = one[v2 + len("val_two") :]
    param_close = ends_marker(prefix(between, tail)[: len(between) - len(param_open)])
    param_sep = between[len(param_close) : len(between) - len(param_open)]
    other_between = two[v3 + len(str(NUMBER)) : k4]
    joint = param_sep + param_open
    if name_and_open is None or not param_close or not other_between.endswith(joint):
        return None
    fmt = replace(
        _partial(name_and_open[: len(name_and_open) - len(param_open)]),
        args="params",
        param_open=param_open,
        param_mid=mid,
        param_close=param_close,
        param_sep=param_sep,
        param_mid_other=two[k3 + len("arg_first") : v3],
        param_close_other=other_between[: len(other_between) - len(joint)],
    )
    return fmt, v2 + len("val_two") + len(param_close)


def _partial(name_close: str) -> CallFormat:
    """A format with its arguments' texts read, the rest still to come."""
    return CallFormat("derived", "", "", name_close, "", "", "")


def _find_all(text: str, start: int, needles: list[str]) -> list[int] | None:
    found = []
    for needle in needles:
        start = text.find(needle, start)
        if start < 0:
            return None
        found.append(start)
        start += len(needle)
    return found


def _split_lead(head: str, reasoning: Reasoning | None) -> tuple[str, str]:
    """What comes before the call block (a closed or empty thinking block, blank lines) and the
    block's own opening."""
    cut = len(head) - len(head.lstrip())
    if reasoning is not None and reasoning.close in head:
        cut = head.index(reasoning.close) + len(reasoning.close)
        cut += len(head[cut:]) - len(head[cut:].lstrip())
    return head[:cut], head[cut:]
