"""Comparing two renderings of a chat template character by character, where the texts a
template writes once per call or parameter meet (formats/call_syntax.py reads a template's
syntax with these). The index of the first call and of the second count as one character,
written INDEX_SLOT; a cut is moved to where a marker begins or ends (`<tool_call>`, not
`\\n<tool_call>`)."""

from __future__ import annotations

from localserve.ground.call_formats import INDEX_SLOT

BOUNDARY = ">]\n}"


def prefix(a: str, b: str) -> str:
    """The longest common prefix, where a digit of `a` and the next digit in `b` (the first and
    second call's index) count as one, written INDEX_SLOT."""
    out = []
    for x, y in zip(a, b, strict=False):
        if x == y:
            out.append(x)
        elif next_digit(x, y):
            out.append(INDEX_SLOT)
        else:
            break
    return "".join(out)


def suffix(a: str, b: str) -> str:
    return prefix(a[::-1], b[::-1])[::-1]


def same(a: str, b: str) -> str | None:
    """`a` with the index slots it shares with `b`; None where they differ otherwise."""
    common = prefix(a, b)
    return common if len(common) == len(a) == len(b) else None


def fits(text: str, pattern: str) -> bool:
    """`text` is `pattern`, its index slots written as digits."""
    return len(text) == len(pattern) and all(
        x == y or (y == INDEX_SLOT and x.isdigit()) for x, y in zip(text, pattern, strict=True)
    )


def next_digit(x: str, y: str) -> bool:
    return x.isdigit() and y.isdigit() and int(y) == int(x) + 1


def begins_marker(piece: str, within: str, keep_space: bool = False) -> str:
    """`piece`, a suffix of `within` that begins each repeated part, cut from its start to
    where a marker begins: after blank space, a marker's end or a bracket (`<tool_call>`, not
    `\\n<tool_call>`; `<|tool_call_begin|>`, not `|><|tool_call_begin|>`)."""
    prev = within[len(within) - len(piece) - 1] if len(piece) < len(within) else "\n"
    k = 0
    while k < len(piece) and (
        (piece[k].isspace() and not keep_space) or not (prev in BOUNDARY or prev.isspace())
    ):
        prev = piece[k]
        k += 1
    return piece[k:]


def ends_marker(piece: str) -> str:
    """`piece`, a text that ends each repeated part, less blank space at its end and cut back
    to a marker's end where it has one (a quote that ends a value stays: `'` of
    `fn(a='x')`)."""
    end = len(piece.rstrip())
    cut = end
    while cut > 0 and piece[cut - 1] not in BOUNDARY:
        cut -= 1
    return piece[:cut] if cut > 0 else piece[:end]


def boundary(text: str, at: int) -> int:
    """`at`, moved back to just after a marker's end, a newline or a bracket."""
    while at > 0 and text[at - 1] not in BOUNDARY:
        at -= 1
    return at


def boundary_after(text: str, at: int) -> int:
    """`at`, moved on to just after a marker's end (or the text's)."""
    while at < len(text) and (at == 0 or text[at - 1] not in BOUNDARY):
        at += 1
    return at


def first_marker(text: str) -> str:
    text = text.lstrip()
    if text[:1] not in ("<", "["):
        return ""
    ends = [at for at in (text.find(">"), text.find("]")) if at > 0]
    return text[: min(ends) + 1] if ends else ""


def last_marker(text: str) -> str:
    text = text.rstrip()
    at = max(text.rfind("<"), text.rfind("["))
    return text[at:] if at >= 0 and text[-1:] in ">]" else ""


# -- calls -------------------------------------------------------------------------------------
