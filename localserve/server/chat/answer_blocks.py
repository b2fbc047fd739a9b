"""An answer as the agent APIs shape it: a list of blocks (thinking, text, a tool call), each
opened, grown and closed as the parsed pieces arrive.

Anthropic's Messages API calls them content blocks (`content_block_start`, `_delta`, `_stop`),
OpenAI's Responses API output items (`response.output_item.added`, ..., `.done`); both faces
write the same `BlockEvent`s in their own words, and build their whole answers from `blocks`.
"""

from __future__ import annotations

from dataclasses import dataclass

from localserve.server.chat.answer_parser import Call, Parsed

THINKING, TEXT, CALL = "thinking", "text", "call"


@dataclass
class Block:
    kind: str  # THINKING, TEXT or CALL
    index: int  # its place in the answer
    text: str = ""  # thinking or text so far
    call: Call | None = None


@dataclass(frozen=True)
class BlockEvent:
    kind: str  # "start", "delta" (with `text`) or "stop"
    block: Block
    text: str = ""


class AnswerBlocks:
    """Feed it the parsed pieces in order, then `finish()`; each call gives the events that
    piece caused. A call comes whole: its arguments are one delta."""

    def __init__(self) -> None:
        self.blocks: list[Block] = []
        self._open: Block | None = None

    def feed(self, piece: Parsed | None) -> list[BlockEvent]:
        events: list[BlockEvent] = []
        if piece is None:
            return events
        if piece.thinking:
            events += self._grow(THINKING, piece.thinking)
        if piece.content:
            events += self._grow(TEXT, piece.content)
        for call in piece.calls:
            events += self._close()
            block = self._start(CALL, call)
            events += [
                BlockEvent("start", block),
                BlockEvent("delta", block, call.arguments_json),
                BlockEvent("stop", block),
            ]
        return events

    def finish(self) -> list[BlockEvent]:
        return self._close()

    @property
    def calls(self) -> list[Call]:
        return [b.call for b in self.blocks if b.call is not None]

    def _start(self, kind: str, call: Call | None = None) -> Block:
        block = Block(kind, len(self.blocks), call=call)
        self.blocks.append(block)
        return block

    def _grow(self, kind: str, text: str) -> list[BlockEvent]:
        events: list[BlockEvent] = []
        if self._open is None or self._open.kind != kind:
            events += self._close()
            self._open = self._start(kind)
            events.append(BlockEvent("start", self._open))
        self._open.text += text
        events.append(BlockEvent("delta", self._open, text))
        return events

    def _close(self) -> list[BlockEvent]:
        if self._open is None:
            return []
        block, self._open = self._open, None
        return [BlockEvent("stop", block)]
