"""Stop strings that may span token boundaries."""

from __future__ import annotations


class StopMatcher:
    """Holds back text that could still turn into a stop string.

    Tokens arrive as text pieces; a stop string like "\\nUser:" can start in one piece and end
    in a later one. We release only text that can no longer be the start of a stop string.
    """

    def __init__(self, stops: tuple[str, ...]) -> None:
        self._stops = tuple(s for s in stops if s)
        self._held = ""
        self.hit: str | None = None  # the stop string that ended the text

    def feed(self, text: str) -> tuple[str, bool]:
        """Add text; return (text safe to emit, whether a stop string was hit)."""
        if not self._stops:
            return text, False
        buf = self._held + text
        hit = -1
        for stop in self._stops:
            at = buf.find(stop)
            if at != -1 and (hit == -1 or at < hit):
                hit, self.hit = at, stop
        if hit != -1:
            self._held = ""
            return buf[:hit], True
        keep = self._longest_partial(buf)
        self._held = buf[len(buf) - keep :] if keep else ""
        return buf[: len(buf) - keep], False

    def flush(self) -> str:
        """Release what was held back once the sequence ends for another reason."""
        held, self._held = self._held, ""
        return held

    def _longest_partial(self, buf: str) -> int:
        """Length of the longest suffix of buf that is a proper prefix of some stop string.

        Only prefixes that end in buf's last character can match, so each stop string is
        tried where that character occurs in it, not at every length: the cost per token is
        bounded by the stop strings' lengths, not their squares."""
        if not buf:
            return 0
        best, last = 0, buf[-1]
        for stop in self._stops:
            end = stop.rfind(last, 0, min(len(stop) - 1, len(buf)))
            while end + 1 > best:
                if buf.endswith(stop[: end + 1]):
                    best = end + 1
                    break
                end = stop.rfind(last, 0, end)
        return best
