"""llama.cpp's two code-completion stopping rules, which its /infill clients send.

- `n_indent`: every line after the first must be indented by at least that many spaces or tabs;
  the first line that is not (an empty one included) is cut right after its indentation, and
  the fill ends there. An editor asks for the indentation of the cursor's line, so that a
  completion stops where its block does.
- `t_max_predict_ms`: once that long has passed since the first token, the fill ends at the
  next token that writes a newline (that token's text is kept).

llama.cpp applies them in its slot loop; here they run on the daemon's side of the stream (the
handler leaving its `generation` cancels the rest, freeing the slot at the engine's next step).
llama.cpp checks indentation once per token, on the line after the last newline it saw; we
check every line, so a token that writes two newlines cannot skip one.
"""

from __future__ import annotations


class LineRules:
    """Fed a fill's text piece by piece; says what may be sent and whether to stop there."""

    def __init__(self, n_indent: int, t_max_predict_ms: int) -> None:
        self.n_indent = n_indent
        self.t_max_s = t_max_predict_ms / 1000 if t_max_predict_ms > 0 else None
        self.text = ""
        # Where the next line to check for its indentation starts (0: none yet, the first
        # line is never checked).
        self._line = 0

    def feed(self, piece: str, since_first_token_s: float) -> tuple[str, bool]:
        """The part of `piece` to send, and whether the fill ends with it."""
        start = len(self.text)
        self.text += piece
        cut = self._indent_cut() if self.n_indent > 0 else None
        if cut is not None:
            self.text = self.text[:cut]
            return self.text[start:], True
        late = self.t_max_s is not None and since_first_token_s > self.t_max_s
        return piece, late and "\n" in piece

    def _indent_cut(self) -> int | None:
        """Where the first line indented less than n_indent ends its indentation, if any."""
        while True:
            if self._line == 0:
                newline = self.text.find("\n")
                if newline < 0:
                    return None
                self._line = newline + 1
            pos = self._line
            while pos < len(self.text) and self.text[pos] in " \t":
                pos += 1
            if pos == len(self.text):
                return None  # the line is all indentation so far: undecided
            if pos - self._line < self.n_indent:
                return pos
            newline = self.text.find("\n", pos)
            if newline < 0:
                return None
            self._line = newline + 1
