"""JSON from a client, read within the bounds Python's decoder does not keep itself, so that no
text a client sends (a body, a batch line, the JSON inside a tool call's `arguments` string)
reaches the daemon as anything but a BadJSON naming what is wrong with it:
- **Depth.** The decoder recurses: 100,000 brackets exhaust its stack (RecursionError, a 500).
  The brackets are counted before the parse, on the UTF-8 text: in a UTF-16 body the byte of a
  quote also stands inside characters (U+2200 is 00 22), which would hide brackets from a
  count over the raw bytes.
- **Integers.** An integer literal of over 4,300 digits is a plain ValueError from `int()`, and
  one of 400 digits is no float (OverflowError wherever a field turns it into one). No field
  takes more than a 64-bit seed's 20 digits.
- **Values.** Each array and object is a list or dict the decoder builds, and each item in one
  a Python object: 16 MiB of `[],` is 5.6 million lists (0.5 s of parse), 16 MiB of token ids
  8.4 million ints (0.4 s), and the parse is one C call that holds the GIL throughout, so no
  thread keeps it off the event loop. A caller that reads a client's body (a request, a batch
  line) passes its `max_json_values`, and a text of more is refused before the parse
  (TooManyValues): its arrays and objects, and the commas between their items and members. A
  million of them parse in about 50 ms, whatever mix they are.

The checks run in C, in time linear in the text: `replace` and `split` drop the strings (numpy
blanks them where they are many and short, see _outside_strings), `count` the containers,
`translate` every byte but the brackets or the digits, and numpy sums the brackets' steps into
depths; so a large body of token ids costs a pass over its bytes, never a Python loop over its
items. The parse itself is CPython's, on the caller's thread: about 1 ms a MiB of text, 50 ns a
short number and 85 ns a container (_parsed).
"""

from __future__ import annotations

import gc
import json
from collections.abc import Callable
from typing import Any

import numpy as np

MAX_DEPTH = 64  # JSON nesting; real requests (tool schemas included) stay far below
MAX_INT_DIGITS = 40  # twice a 64-bit seed's 20; every such integer is a float too
SETTING = "max_json_values"  # ground/settings.py: the bound callers pass as max_values


class BadJSON(ValueError):
    """Why a text is refused, as words that follow its name: "is not valid JSON: ..."."""


class TooManyValues(BadJSON):
    """More values than the caller's bound; a request's reader answers it with a 413 naming the
    setting (readers.py)."""

    def __init__(self, count: int, limit: int) -> None:
        super().__init__(
            f"holds {count} JSON values (arrays, objects and the items in them); "
            f"at most {limit} are taken ({SETTING})"
        )
        self.count, self.limit = count, limit


# Every byte that is not a bracket; every digit as "0".
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")
_DIGITS = bytes(ord("0") if b in b"0123456789" else ord(" ") for b in range(256))
_LONG_RUN = b"0" * (MAX_INT_DIGITS + 1)
# A bracket's step in depth, by byte: +1 opens, -1 closes.
_STEPS = np.zeros(256, np.int8)
_STEPS[list(b"[{")] = 1
_STEPS[list(b"]}")] = -1
# Bytes summed at a time: a few MiB of numpy's at most, and a deep text stops at its first chunk.
_CHUNK = 1 << 20
# Quotes at least this dense (one in so many bytes) cost the split of _outside_strings more than
# numpy's pass over every byte (_blanked): 16 MiB of `"",` took 0.6 s to split, 0.04 s in numpy.
_DENSE_QUOTES = 12
_QUOTE, _SPACE = ord('"'), ord(" ")


def loads(raw: bytes | str, max_values: int | None = None) -> Any:
    """The JSON value of `raw` (bytes in any encoding `json.loads` reads, or text), or BadJSON;
    TooManyValues for a text of more values than `max_values`: arrays and objects, and the
    commas that part their items, as the decoder will build them."""
    text, utf8 = _decoded(raw)
    bare = _outside_strings(utf8)
    opened = bare.count(b"[") + bare.count(b"{")
    if max_values is not None and (values := opened + bare.count(b",")) > max_values:
        raise TooManyValues(values, max_values)
    # No text nests deeper than it has containers: a small one is not summed at all.
    if opened > MAX_DEPTH and _deeper(bare.translate(None, _NOT_BRACKETS), MAX_DEPTH):
        raise BadJSON(f"nests JSON deeper than {MAX_DEPTH} levels")
    # Nearly every text has no run of digits that long; only one that has pays for the hook.
    hook = _bounded_int if _LONG_RUN in bare.translate(_DIGITS) else int
    try:
        return _parsed(text, hook)
    except BadJSON:
        raise
    except ValueError as exc:  # the decoder's errors, and UnicodeDecodeError
        raise BadJSON(f"is not valid JSON: {exc}") from None


def parse_checked(raw: bytes | str) -> Any:
    """The JSON value of a text `loads` has already taken (in readers.py's child process): the
    parse alone, without the checks before it."""
    return _parsed(_decoded(raw)[0], int)


def _deeper(brackets: bytes, limit: int) -> bool:
    """Whether the running depth of `brackets` (bytes of `[]{}` only) ever passes `limit`: the
    steps' running sum, a chunk at a time, in numpy rather than a Python loop a bracket (16 MiB
    of `[],` took 1.5 s that way)."""
    steps = _STEPS[np.frombuffer(brackets, np.uint8)]
    depth = 0
    for start in range(0, len(steps), _CHUNK):
        sums = np.cumsum(steps[start : start + _CHUNK], dtype=np.int32)
        if depth + int(sums.max()) > limit:
            return True
        depth += int(sums[-1])
    return False


def _parsed(text: bytes | str, hook: Callable[[str], int]) -> Any:
    """`json.loads` with the cyclic collector held off. Each list and dict the decoder makes
    counts toward the collector's next pass, and every few passes walk the daemon's whole heap:
    a text of a million arrays took 0.35 s with it on, 0.1 s off. What the decoder builds holds
    no cycle, so nothing is missed; its objects get their one young pass after. Turned back on
    only if it was on: a thread that finds it off (another parse under way) leaves it to the
    parse that turned it off."""
    collecting = gc.isenabled()
    gc.disable()
    try:
        return json.loads(text, parse_int=hook)
    finally:
        if collecting:
            gc.enable()


def _outside_strings(utf8: bytes) -> bytes:
    r"""The text less its strings, quotes included: what the decoder reads as brackets and numbers.

    Escapes pair from the left, as in JSON (`\\` is one backslash, so `\\"` ends a string and
    `\\\"` does not): dropping each `\\` and then each `\"` leaves only the quotes that open and
    close strings, and every other piece between them is outside. A backslash stands only inside
    a string in JSON, so this is exact up to the first error the decoder meets, and the decoder
    recurses no further than that. An unterminated last string counts as outside, as it did for
    the regex this replaces, so a body cut short in a string of brackets is still refused for
    its depth. That regex took quadratic time on `"\"\"\"...` (64 KB: 14 s): wherever a string did
    not end, it began one again at the next escaped quote.
    """
    # A byte's search is a memchr, a pair's a slower scan (both replaces: 35 ms on 16 MiB): a
    # text without a backslash, a body of numbers or brackets, skips them.
    if b"\\" in utf8:
        utf8 = utf8.replace(b"\\\\", b"").replace(b'\\"', b"")
    quotes = utf8.count(b'"')
    if quotes * _DENSE_QUOTES > len(utf8):
        return _blanked(utf8, quotes)
    pieces = utf8.split(b'"')
    outside = pieces[::2]
    if len(pieces) % 2 == 0:  # an odd number of quotes: the last string is unterminated
        outside.append(pieces[-1])
    return b"".join(outside)


def _blanked(utf8: bytes, quotes: int) -> bytes:
    """What _outside_strings leaves of a text of `quotes` (none escaped), with each string made
    spaces rather than dropped: a byte is in a string where the quotes before it, itself
    included, are odd. Spaces break no bracket's count and join no digits."""
    text = np.frombuffer(utf8, np.uint8)
    out = text.copy()
    odd = 0  # the quotes' parity before the chunk
    for start in range(0, len(text), _CHUNK):
        quote = text[start : start + _CHUNK] == _QUOTE
        counts = np.cumsum(quote, dtype=np.int32)  # quicker than uint8 (35 ms, not 56: 16 MiB)
        counts += odd
        counts &= 1
        odd = int(counts[-1])
        inside = counts.astype(bool) | quote  # a closing quote's count is even
        np.putmask(out[start : start + _CHUNK], inside, _SPACE)
    if quotes % 2:  # the last string is unterminated: outside, as in the split
        last = utf8.rfind(b'"')
        return bytes(out[: last + 1]) + utf8[last + 1 :]
    return bytes(out)


def _decoded(raw: bytes | str) -> tuple[bytes | str, bytes]:
    """What to parse, and the same text as UTF-8 for the checks, as `json.loads` reads it: bytes
    in the encoding its first bytes say, lone surrogates passed through."""
    if isinstance(raw, str):
        return raw, raw.encode("utf-8", "surrogatepass")
    encoding = json.detect_encoding(raw)
    if encoding in ("utf-8", "utf-8-sig"):
        return raw, raw
    try:
        text = raw.decode(encoding, "surrogatepass")
    except UnicodeDecodeError as exc:
        raise BadJSON(f"is not valid JSON: {exc}") from None
    return text, text.encode("utf-8", "surrogatepass")


def _bounded_int(literal: str) -> int:
    digits = len(literal.lstrip("-"))
    if digits > MAX_INT_DIGITS:
        raise BadJSON(
            f"holds an integer of {digits} digits; no field takes more than {MAX_INT_DIGITS}"
        )
    return int(literal)
