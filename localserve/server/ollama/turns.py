"""An Ollama chat fitted to its window as Ollama fits it: the oldest turns are dropped, never a
system message nor the last message, until the rendered conversation leaves room to answer.

Dropping one turn at a time and rendering and tokenizing the whole conversation again after
each was quadratic: 30,000 short turns with `num_ctx: 16` rendered 30,000 conversations of up
to 30,000 messages each. Here each message's text is
tokenized once, all in one trip, and the turns to drop are chosen by those counts. The
conversation is rendered again only to check the choice, since a template writes its own
tokens around each message (a role's header, a call's wrapping, the tools' listing): each
rendering measures those, and the next choice uses the measure. The first guess spreads the
whole conversation's wrapping (the tools' listing too) over its messages, more than a turn's
own, so the first choice errs short, and the later ones end on the fewest turns that let the
conversation fit, as the loop did where every turn's wrapping is alike (a turn or two more, in
about 1 case of 60, where a role's differs from another's by a few tokens); in all at most
MAX_RENDERS renderings: one where it fits, two to four where it does not.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

Message = dict[str, Any]
# The conversation rendered by the model's template and tokenized (chat/plan.py's encode).
Encode = Callable[[list[Message]], Awaitable[list[int]]]
# How many tokens each of some texts is, in one trip (ResidentModel.count_tokens).
Count = Callable[[list[str]], Awaitable[list[int]]]

# Renderings of one conversation at most, the first included. A template whose wrapping the
# counts misjudge even so is left longer than its window: fit_prompt (options.py) cuts it then.
MAX_RENDERS = 6


async def fit_turns(messages: list[Message], ctx: int, encode: Encode, count: Count) -> list[int]:
    """The tokens of `messages` less their oldest turns, as few as leave fewer than `ctx`
    tokens; all of them that may go, when even that is too long."""
    tokens = await encode(messages)
    droppable = [i for i, m in enumerate(messages[:-1]) if m.get("role") != "system"]
    if len(tokens) < ctx or not droppable:
        return tokens
    sizes = await _sizes(messages, count)
    whole = len(tokens)
    # What a turn costs beyond its text: at first the whole conversation's wrapping spread
    # over its messages (on the high side: it holds the tools' listing too).
    wrapping = max(0.0, (whole - sum(sizes)) / len(messages))
    dropped = 0  # the oldest `dropped` of `droppable` are gone
    for _ in range(MAX_RENDERS - 1):
        if len(tokens) < ctx or dropped == len(droppable):
            break
        excess, freed = len(tokens) - ctx + 1, 0.0
        while dropped < len(droppable) and freed < excess:
            freed += sizes[droppable[dropped]] + wrapping
            dropped += 1
        gone = set(droppable[:dropped])
        tokens = await encode([m for i, m in enumerate(messages) if i not in gone])
        # Measured now: the tokens those turns took, less their texts, a turn.
        texts = sum(sizes[i] for i in gone)
        wrapping = max(0.0, (whole - len(tokens) - texts) / dropped)
    return tokens


async def _sizes(messages: list[Message], count: Count) -> list[int]:
    """Each message's text in tokens: its content, its thinking and its calls. An empty text
    is 0 without a trip."""
    texts = [_text(m) for m in messages]
    filled = [i for i, text in enumerate(texts) if text]
    counted = await count([texts[i] for i in filled]) if filled else []
    sizes = [0] * len(messages)
    for i, n in zip(filled, counted):
        sizes[i] = n
    return sizes


def _text(message: Message) -> str:
    calls = message.get("tool_calls")
    return "".join(
        (
            str(message.get("content") or ""),
            str(message.get("thinking") or ""),
            json.dumps(calls, ensure_ascii=False) if calls else "",
        )
    )
