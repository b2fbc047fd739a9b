"""Word wrapping for streamed text: a terminal would otherwise break lines mid-word.

A word is held until the space after it arrives, then goes on this line or the next; the
text a script reads through a pipe is never wrapped (the caller only wraps on a terminal).
"""

from __future__ import annotations

import shutil
import sys
from collections.abc import Callable


class WordWrap:
    def __init__(self, write: Callable[[str], None], width: int | None = None) -> None:
        self._write = write
        self.width = max(width or shutil.get_terminal_size().columns, 20)
        self.column = 0
        self.word = ""

    def __call__(self, text: str) -> None:
        out: list[str] = []
        for ch in text:
            if ch == "\n":
                self._place_word(out)
                out.append("\n")
                self.column = 0
            elif ch in " \t":
                self._place_word(out)
                if self.column >= self.width:
                    out.append("\n")  # the space is where the line breaks
                    self.column = 0
                else:
                    out.append(ch)
                    self.column += 1
            else:
                self.word += ch
                if len(self.word) >= self.width:  # longer than a line: break it anyway
                    self._place_word(out)
        if out:
            self._write("".join(out))

    def flush(self) -> None:
        out: list[str] = []
        self._place_word(out)
        if out:
            self._write("".join(out))

    def _place_word(self, out: list[str]) -> None:
        if not self.word:
            return
        if self.column and self.column + len(self.word) > self.width:
            out.append("\n")
            self.column = 0
        out.append(self.word)
        self.column += len(self.word)
        self.word = ""


def write_now(text: str) -> None:
    sys.stdout.write(text)
    sys.stdout.flush()


def answer_writer() -> Callable[[str], None]:
    """Where an answer's text goes: word-wrapped on a terminal, as it comes otherwise."""
    return WordWrap(write_now) if sys.stdout.isatty() else write_now
