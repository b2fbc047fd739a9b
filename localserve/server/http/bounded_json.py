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

The checks run in C, in time linear in the text: `replace` and `split` drop the strings (see
_outside_strings), `translate` every byte but the brackets or the digits; so a large body of
token ids costs a loop over its few brackets, not over its numbers.
"""

from __future__ import annotations

import json
from typing import Any

MAX_DEPTH = 64  # JSON nesting; real requests (tool schemas included) stay far below
MAX_INT_DIGITS = 40  # twice a 64-bit seed's 20; every such integer is a float too


class BadJSON(ValueError):
    """Why a text is refused, as words that follow its name: "is not valid JSON: ..."."""


# Every byte that is not a bracket; every digit as "0".
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")
_DIGITS = bytes(ord("0") if b in b"0123456789" else ord(" ") for b in range(256))
_LONG_RUN = b"0" * (MAX_INT_DIGITS + 1)


def loads(raw: bytes | str) -> Any:
    """The JSON value of `raw` (bytes in any encoding `json.loads` reads, or text), or BadJSON."""
    text, utf8 = _decoded(raw)
    bare = _outside_strings(utf8)
    depth = 0
    for byte in bare.translate(None, _NOT_BRACKETS):
        depth += 1 if byte in b"[{" else -1
        if depth > MAX_DEPTH:
            raise BadJSON(f"nests JSON deeper than {MAX_DEPTH} levels")
    # Nearly every text has no run of digits that long; only one that has pays for the hook.
    hook = _bounded_int if _LONG_RUN in bare.translate(_DIGITS) else int
    try:
        return json.loads(text, parse_int=hook)
    except BadJSON:
        raise
    except ValueError as exc:  # the decoder's errors, and UnicodeDecodeError
        raise BadJSON(f"is not valid JSON: {exc}") from None


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
    pieces = utf8.replace(b"\\\\", b"").replace(b'\\"', b"").split(b'"')
    outside = pieces[::2]
    if len(pieces) % 2 == 0:  # an odd number of quotes: the last string is unterminated
        outside.append(pieces[-1])
    return b"".join(outside)


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
