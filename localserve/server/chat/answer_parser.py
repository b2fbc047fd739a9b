"""An answer's text, as it streams, split into what each face sends apart: a reasoning model's
thinking, the content, and tool calls.

Text streams on at once except a tail that could be the start of a marker (`<think>`,
`</think>`, a call's trigger), which waits for the next piece. A call is handed over whole,
once its JSON object is complete; with grammar enforcement (server/chat/tool_calls.py) the text from
the trigger on is always a well-formed call, and one cut short (max_tokens) is given back as
content, as it was written.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass, field
from typing import Any

from localserve.ground.call_formats import NAME_KEY, CallFormat

THINK_OPEN, THINK_CLOSE = "<think>", "</think>"


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
    """Feed it the answer's pieces in order, then `finish()`."""

    def __init__(
        self, calls: CallFormat | None = None, thinking: bool = False, thinking_open: bool = False
    ) -> None:
        self._format = calls
        self._think = "in" if thinking_open else ("start" if thinking else "off")
        self._trim = False  # the answer after `</think>` has not begun yet
        self._buf = ""
        self._in_call = False
        self._pos = 0  # in a call block: where the next object, separator or closing starts
        self._expect_object = True
        self._block_start = 0  # calls read before this block
        self._decoder = json.JSONDecoder()
        self.calls: list[Call] = []

    def feed(self, text: str, final: bool = False) -> Parsed:
        self._buf += text
        out = Parsed()
        self._split_thinking(out, final)
        if self._think not in ("in", "start"):
            self._split_calls(out, final)
        return out

    def finish(self) -> Parsed:
        return self.feed("", final=True)

    # -- thinking ----------------------------------------------------------------------------

    def _split_thinking(self, out: Parsed, final: bool) -> None:
        if self._think == "start":
            # A reasoning model opens with <think> or not at all.
            stripped = self._buf.lstrip()
            if stripped.startswith(THINK_OPEN):
                self._buf = stripped[len(THINK_OPEN) :]
                self._think = "in"
            elif final or not THINK_OPEN.startswith(stripped):
                self._think = "done"
            else:
                return
        if self._think == "in":
            end = self._buf.find(THINK_CLOSE)
            if end >= 0:
                out.thinking += self._buf[:end]
                self._buf = self._buf[end + len(THINK_CLOSE) :]
                self._think, self._trim = "done", True
            else:
                keep = 0 if final else _held(self._buf, THINK_CLOSE)
                out.thinking += self._buf[: len(self._buf) - keep]
                self._buf = self._buf[len(self._buf) - keep :]
        if self._trim:
            # The blank lines a model writes after `</think>` are no part of the answer, in
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
        while True:
            if not self._in_call:
                start = self._buf.find(fmt.trigger)
                if start < 0:
                    keep = 0 if final else _held(self._buf, fmt.trigger)
                    out.content += self._buf[: len(self._buf) - keep]
                    self._buf = self._buf[len(self._buf) - keep :]
                    return
                out.content += self._buf[:start]
                self._buf = self._buf[start:]
                self._in_call, self._pos, self._expect_object = True, len(fmt.open), True
                self._block_start = len(self.calls)
            if not self._step_call(fmt, out, final):
                return

    def _step_call(self, fmt: CallFormat, out: Parsed, final: bool) -> bool:
        """Read what the call block holds so far; False when it waits for more text."""
        buf = self._buf
        if self._expect_object:
            if not buf.startswith(fmt.first[: min(len(buf), len(fmt.first))]):
                return self._not_a_call(out)
            try:
                obj, end = self._decoder.raw_decode(buf, self._pos)
            except RecursionError:  # nested past the decoder's stack: a model's, never a call
                return self._not_a_call(out)
            except ValueError:
                if final:
                    return self._not_a_call(out)
                return False
            name, arguments = obj.get("name"), obj.get(fmt.args_key, {})
            if not isinstance(name, str) or not isinstance(arguments, dict):
                return self._not_a_call(out)
            call = Call(len(self.calls), name, arguments)
            self.calls.append(call)
            out.calls.append(call)
            self._pos, self._expect_object = end, False
            return True
        rest = buf[self._pos :]
        sep = fmt.sep + NAME_KEY
        if rest.startswith(sep):
            self._pos += len(fmt.sep)
            self._expect_object = True
            return True
        if not final and (sep.startswith(rest) or fmt.close.startswith(rest)):
            return False  # a separator or the closing, not yet whole
        if fmt.close and rest.startswith(fmt.close):
            rest = rest[len(fmt.close) :]
        self._buf, self._in_call = rest, False
        return True

    def _not_a_call(self, out: Parsed) -> bool:
        """Text that began like a call and is not one (or was cut short) is content, from where
        the calls already handed over end."""
        out.content += self._buf if len(self.calls) == self._block_start else self._buf[self._pos :]
        self._buf, self._in_call = "", False
        return False
