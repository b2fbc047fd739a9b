"""An answer's text, as it streams, split into what each face sends apart: a reasoning model's
thinking, the content, and tool calls.

Text streams on at once except a tail that could be the start of a marker (the reasoning
block's opening or closing, a call's trigger), which waits for the next piece. Calls are read
in the model's own syntax (server/chat/call_reader.py) and handed over whole. A call written
inside the reasoning block ends the thinking there: it is a call, never thinking. Call markup
never reaches the content: a block cut short at the answer's end is dropped; text that began
like a call and is not one is content, as it was written.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass, field
from typing import Any

from localserve.ground.call_formats import CallFormat, Reasoning
from localserve.server.chat.call_reader import CallReader

THINK = Reasoning("<think>", "</think>", "\n</think>\n\n")


@dataclass
class Call:
    index: int
    name: str
    arguments: dict[str, Any]
    id: str = field(default_factory=lambda: "call_" + uuid.uuid4().hex[:24])

    @property
    def arguments_json(self) -> str:
        """The arguments as OpenAI sends them: JSON text."""
        return json.dumps(self.arguments, ensure_ascii=False)


@dataclass
class Parsed:
    """What one piece of text became; empty strings where it held none."""

    content: str = ""
    thinking: str = ""
    calls: list[Call] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.content or self.thinking or self.calls)


def _held(text: str, marker: str) -> int:
    """How many characters at the end of `text` could begin `marker`."""
    for n in range(min(len(text), len(marker) - 1), 0, -1):
        if marker.startswith(text[-n:]):
            return n
    return 0


class AnswerParser:
    """Feed it the answer's pieces in order, then `finish()`. `text_params` names each
    function's string parameters, for formats that write parameters one at a time."""

    def __init__(
        self,
        calls: CallFormat | None = None,
        reasoning: Reasoning | None = None,
        thinking_open: bool = False,
        text_params: dict[str, set[str]] | None = None,
    ) -> None:
        self._format = calls
        self._reasoning = reasoning or THINK
        self._think = "in" if thinking_open else ("start" if reasoning else "off")
        self._trim = False  # the answer after the reasoning's close has not begun yet
        self._after_thought_call = False  # a call ended the thinking
        self._late_close = False  # its close may still come, after the calls: dropped
        self._skip_space = False  # and the blank lines after that close
        self._quiet_held = ""  # content that may begin a quiet marker
        self._buf = ""
        self._reader: CallReader | None = None
        self._text_params = text_params or {}
        self.calls: list[Call] = []

    @property
    def think_close(self) -> str:
        return self._reasoning.close

    def feed(self, text: str, final: bool = False) -> Parsed:
        self._buf += text
        out = Parsed()
        self._split_thinking(out, final)
        if self._think not in ("in", "start"):
            self._split_calls(out, final)
        if self._reasoning.quiet:
            out.content = self._without_quiet(out.content, final)
        return out

    def _without_quiet(self, content: str, final: bool) -> str:
        """The content less the markers that carry no text of it, a tail that could begin one
        held for the next piece."""
        text = self._quiet_held + content
        for marker in self._reasoning.quiet:
            text = text.replace(marker, "")
        keep = 0 if final else max(_held(text, m) for m in self._reasoning.quiet)
        self._quiet_held = text[len(text) - keep :]
        return text[: len(text) - keep]

    def finish(self) -> Parsed:
        return self.feed("", final=True)

    # -- thinking ----------------------------------------------------------------------------

    def _split_thinking(self, out: Parsed, final: bool) -> None:
        opening, close = self._reasoning.open, self._reasoning.close
        if self._think == "start":
            # A reasoning model opens its block first or not at all.
            stripped = self._buf.lstrip()
            if stripped.startswith(opening):
                self._buf = stripped[len(opening) :]
                self._think = "in"
            elif stripped.startswith(close):  # the prompt opened the block after all
                self._buf = stripped[len(close) :]
                self._think, self._trim = "done", True
            elif final or not (opening.startswith(stripped) or close.startswith(stripped)):
                self._think = "done"
            else:
                return
        if self._think == "in":
            end = self._buf.find(close)
            trigger = self._format.trigger if self._format is not None else ""
            call = self._buf.find(trigger) if trigger else -1
            maybe_close = end < 0 and not final and close.startswith(self._buf[call:])
            if call >= 0 and (end < 0 or call < end) and not maybe_close:
                out.thinking += self._buf[:call].rstrip()
                self._buf = self._buf[call:]
                self._think, self._after_thought_call = "done", True
            elif end >= 0:
                out.thinking += self._buf[:end]
                self._buf = self._buf[end + len(close) :]
                self._think, self._trim = "done", True
            else:
                keep = 0 if final else max(_held(self._buf, close), _held(self._buf, trigger))
                if maybe_close and call >= 0:  # a trigger that may yet be the close's start
                    keep = len(self._buf) - call
                out.thinking += self._buf[: len(self._buf) - keep]
                self._buf = self._buf[len(self._buf) - keep :]
        if self._trim:
            # The blank lines a model writes after the close are no part of the answer, in
            # whichever pieces they come: `</think>` and "\n\n" are often tokens of their own.
            self._buf = self._buf.lstrip()
            self._trim = not self._buf

    # -- tool calls --------------------------------------------------------------------------

    def _split_calls(self, out: Parsed, final: bool) -> None:
        fmt = self._format
        if fmt is None:
            out.content += self._buf
            self._buf = ""
            return
        trigger = fmt.trigger
        while True:
            if self._late_close and self._reader is None:
                # A thought a call ended may still close after the calls: no part of the answer.
                rest = self._buf.lstrip()
                close = self._reasoning.close
                if rest.startswith(close):
                    self._buf = rest[len(close) :]
                    self._late_close, self._skip_space = False, True
                elif close.startswith(rest) and not final:
                    return
                else:
                    self._late_close = False
            if self._skip_space:
                self._buf = self._buf.lstrip()
                self._skip_space = not self._buf and not final
            if self._reader is None:
                start = self._buf.find(trigger)
                if start < 0:
                    keep = _held(self._buf, trigger)
                    out.content += self._buf[: len(self._buf) - keep]
                    self._buf = self._buf[len(self._buf) - keep :]
                    if final and keep < 2:  # a lone `<` or `[` is text; more, a cut trigger
                        out.content += self._buf
                    if final:
                        self._buf = ""
                    return
                out.content += self._buf[:start]
                self._buf = self._buf[start + len(trigger) :]
                expect = fmt.first.lstrip()[len(trigger) :]
                self._reader = CallReader(fmt, self._text_params, expect)
            reader = self._reader
            for read in reader.read(self._buf, final):
                call = Call(len(self.calls), read.name, read.arguments)
                self.calls.append(call)
                out.calls.append(call)
            if reader.failed:
                # Not a call after all: the text from where the whole calls end is content.
                out.content += ("" if reader.mark else trigger) + self._buf[reader.mark :]
                self._buf, self._reader = "", None
                return
            if not reader.done:
                return
            self._buf, self._reader = self._buf[reader.pos :], None
            self._late_close = self._after_thought_call
            if not self._buf and not self._late_close:
                return
