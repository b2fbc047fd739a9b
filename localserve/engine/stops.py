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

    def feed(self, text: str) -> tuple[str, bool]:
        """Add text; return (text safe to emit, whether a stop string was hit)."""
        if not self._stops:
            return text, False
        buf = self._held + text
        hit = -1
        for stop in self._stops:
            at = buf.find(stop)
            if at != -1 and (hit == -1 or at < hit):
                hit = at
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
        """Length of the longest suffix of buf that is a proper prefix of some stop string."""
        best = 0
        for stop in self._stops:
            for n in range(min(len(stop) - 1, len(buf)), best, -1):
                if buf.endswith(stop[:n]):
                    best = n
                    break
        return best
