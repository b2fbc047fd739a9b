"""Reads a call block, as it streams, in the model's own call syntax (ground/call_formats.py).

The reader keeps its place in the block and goes on from there as text arrives: each piece is
read once, but for a JSON object of arguments, decoded again as it grows, as before. A call is
handed over once it is whole. At the answer's end a call whose name and arguments are whole is
handed over even if its closing tags never came; a call cut short in its arguments is dropped,
never given back as markup.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from localserve.ground.call_formats import ID_SLOT, INDEX_SLOT, CallFormat

WAIT = -1  # the text so far could still become what is expected
_NAME_STOPS = frozenset(' \t\n<>"[]{}(),=:|')


def match(buf: str, pos: int, text: str) -> int | None:
    """Where `text` (with its slots) ends if `buf` holds it at `pos`; WAIT where `buf` ends
    first and what it holds fits so far; None where it does not fit."""
    for ch in text:
        if ch == ID_SLOT or ch == INDEX_SLOT:
            start = pos
            ok = str.isdigit if ch == INDEX_SLOT else _id_char
            while pos < len(buf) and ok(buf[pos]):
                pos += 1
            if pos == len(buf):
                return WAIT
            if pos == start:
                return None
            continue
        if pos == len(buf):
            return WAIT
        if buf[pos] != ch:
            return None
        pos += 1
    return pos


def _id_char(ch: str) -> bool:
    return ch.isalnum() or ch in "_-"


@dataclass
class ReadCall:
    name: str
    arguments: dict[str, Any]


@dataclass
class CallReader:
    """One call block, from just after its trigger. `read` returns the calls that became whole;
    `done` says the block ended, `rest` where the text after it starts."""

    fmt: CallFormat
    text_params: dict[str, set[str]]  # each function's parameters that are strings
    expect: str  # the block's text after the trigger, before the first call's name
    state: str = "expect"
    pos: int = 0
    mark: int = 0  # where the last whole call ends
    done: bool = False
    failed: bool = False
    _name_text: str = ""
    _read: dict[str, Any] = field(default_factory=dict)  # the parameters read so far
    _args_value: dict[str, Any] = field(default_factory=dict)
    _key_text: str = ""
    _scan: int = 0  # where the search for a value's closing goes on from
    _decoder: json.JSONDecoder = field(default_factory=json.JSONDecoder)

    def read(self, buf: str, final: bool) -> list[ReadCall]:
        calls: list[ReadCall] = []
        while not self.done and not self.failed:
            step = getattr(self, "_" + self.state)(buf, final)
            if step is None:  # waits for more text
                break
            if isinstance(step, ReadCall):
                calls.append(step)
        if final and not self.done and not self.failed:
            whole = self._salvage(buf)
            if whole is not None:
                calls.append(whole)
            self.done = True
            self.pos = len(buf)
        return calls

    # -- states: each returns True to go on, None to wait, a ReadCall when one is whole -------

    def _literal(self, buf: str, final: bool, text: str, then: str) -> bool | None:
        end = match(buf, self.pos, text)
        if end is None:
            self.failed = True
            return True
        if end == WAIT:
            return None  # at the answer's end: cut short, dropped
        self.pos, self.state = end, then
        return True

    def _expect(self, buf: str, final: bool) -> bool | None:
        return self._literal(buf, final, self.expect, "name")

    def _name(self, buf: str, final: bool) -> bool | None:
        end = self.pos
        while end < len(buf) and buf[end] not in _NAME_STOPS:
            end += 1
        if end == len(buf) and not final:
            return None
        if end == self.pos:
            self.failed = True
            return True
        self._name_text, self.pos = buf[self.pos : end], end
        self._read = {}
        self.state = "name_close"
        return True

    def _name_close(self, buf: str, final: bool) -> bool | None:
        return self._literal(buf, final, self.fmt.name_close, "args")

    def _args(self, buf: str, final: bool) -> bool | None:
        if self.fmt.args == "json":
            try:
                value, end = self._decoder.raw_decode(buf, self.pos)
            except RecursionError:  # nested past the decoder's stack: a model's, never a call
                self.failed = True
                return True
            except ValueError:
                return None  # not whole yet; at the answer's end, cut short
            if not isinstance(value, dict):
                self.failed = True
                return True
            self._args_value, self.pos = value, end
            self.state = "call_close"
            return True
        self.state = "params"
        return True

    def _params(self, buf: str, final: bool) -> bool | None:
        """Another parameter, or the call's closing."""
        fmt = self.fmt
        lead = fmt.param_sep if self._read else ""
        opened = match(buf, self.pos, lead + fmt.param_open)
        ended = match(buf, self.pos, fmt.call_close)
        if opened is not None and opened != WAIT:
            if opened == len(buf) and not final:
                return None
            if opened < len(buf) and (buf[opened].isalpha() or buf[opened] == "_"):
                self.pos, self.state = opened, "key"
                return True
        if WAIT in (opened, ended) and not final:
            return None
        if ended is not None and ended != WAIT:
            self._args_value = dict(self._read)
            self.state = "call_close"
            return True
        if final:  # the closing cut short: the call is whole as far as it was read
            return None
        self.failed = True
        return True

    def _key(self, buf: str, final: bool) -> bool | None:
        fmt = self.fmt
        for end in range(self.pos, len(buf)):
            for mid, kind in ((fmt.param_mid, "text"), (fmt.param_mid_other, "json")):
                after = match(buf, end, mid) if mid and buf.startswith(mid[:1], end) else None
                if after == WAIT:  # at the answer's end too: cut short, dropped
                    return None
                if after is not None:
                    key = buf[self.pos : end]
                    is_text = key in self.text_params.get(self._name_text, set())
                    if (kind == "text") == is_text or fmt.param_mid == fmt.param_mid_other:
                        self._key_text, self.pos = key, after
                        self.state = "text_value" if is_text else "json_value"
                        return True
            if buf[end] in "\n<>":
                self.failed = True
                return True
        if final:
            self.failed = True
            return True
        return None

    def _closing(self, buf: str, close: str) -> int:
        """Where `close` starts from the value on, each character searched once."""
        end = buf.find(close, max(self.pos, self._scan))
        self._scan = max(self.pos, len(buf) - len(close) + 1) if end < 0 else 0
        return end

    def _text_value(self, buf: str, final: bool) -> bool | None:
        end = self._closing(buf, self.fmt.param_close)
        if end < 0:
            return None
        self._read[self._key_text] = buf[self.pos : end]
        self.pos = end + len(self.fmt.param_close)
        self.state = "params"
        return True

    def _json_value(self, buf: str, final: bool) -> bool | None:
        close = self.fmt.param_close_other
        if close:
            end = self._closing(buf, close)
            if end < 0:
                return None
            raw, after = buf[self.pos : end], end + len(close)
        else:
            try:
                _, after = self._decoder.raw_decode(buf, self.pos)
            except (ValueError, RecursionError):
                return None
            if after == len(buf) and not final:
                return None  # a number may go on
            raw = buf[self.pos : after]
        try:
            self._read[self._key_text] = json.loads(raw)
        except (ValueError, RecursionError):
            self._read[self._key_text] = raw.strip()
        self.pos, self.state = after, "params"
        return True

    def _call_close(self, buf: str, final: bool) -> bool | ReadCall | None:
        fmt = self.fmt
        another = match(buf, self.pos, fmt.call_close + fmt.sep + fmt.call_open)
        last = match(buf, self.pos, fmt.call_close + fmt.close)
        if WAIT in (another, last) and not final:
            return None
        call = ReadCall(self._name_text, self._args_value)
        if another is not None and another != WAIT:
            self.pos, self.state = another, "name"
            self.mark = self.pos
        else:
            if last is not None and last != WAIT:
                self.pos = last
            else:  # closing tags missing or cut short: the call is whole, the block ends
                self.pos = len(buf) if final else self._past_close(buf)
            self.done = True
        return call

    def _past_close(self, buf: str) -> int:
        """Where the text after a call that lacks its own closing (Mistral's call without its
        id) goes on: past the block's closing, where it follows within a few characters."""
        close = self.fmt.close.strip()
        at = buf.find(close, self.pos, self.pos + len(close) + 32) if close else -1
        return at + len(close) if at >= 0 else self.pos

    def _salvage(self, buf: str) -> ReadCall | None:
        """At the answer's end, inside a call: whole where its arguments are, a string value
        that never closed taken as it stands."""
        if self.state == "call_close":
            return ReadCall(self._name_text, self._args_value)
        if self.state == "text_value":
            self._read[self._key_text] = buf[self.pos :].rstrip()
            return ReadCall(self._name_text, dict(self._read))
        if self.state == "params":
            return ReadCall(self._name_text, dict(self._read))
        return None
