"""Incremental detokenization that never emits half a UTF-8 character."""

from __future__ import annotations

import codecs


class IncrementalDetokenizer:
    """Turns token byte pieces into text as they arrive.

    A multi-byte character (an emoji, most CJK) is often split across tokens; the incremental
    decoder keeps the incomplete tail until the next piece completes it.
    """

    def __init__(self) -> None:
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")

    def feed(self, piece: bytes) -> str:
        return self._decoder.decode(piece, final=False)

    def flush(self) -> str:
        """What is left at the end of a sequence: nothing. A character the last pieces began
        and never finished (a `max_tokens` cut inside an emoji) is dropped, as llama.cpp's
        server drops it, rather than ended with U+FFFD."""
        self._decoder.reset()
        return ""
