"""An upstream's Chat Completions answer, streamed or whole, as the parsed pieces every face
writes a local answer from (turn/ask.py's Answering). Pure: no HTTP here."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from localserve.server.chat.answer_parser import Call, Parsed
from localserve.server.http import bounded_json

JSON = dict[str, Any]


def reasoning(message: JSON) -> str:
    """A message's (or delta's) thinking: `reasoning`, as vLLM names it since late 2025 (and
    OpenRouter), or `reasoning_content` (DeepSeek's, SGLang's, llama.cpp's, older vLLM's)."""
    for name in ("reasoning_content", "reasoning"):
        text = message.get(name)
        if isinstance(text, str) and text:
            return text
    return ""


@dataclass
class StreamState:
    """What a Chat Completions stream has said so far: its streamed calls (by index, their
    argument text growing, with the id the first delta gave), how it ended and its usage."""

    calls: dict[int, JSON] = field(default_factory=dict)
    finish: Any = None
    usage: Any = None

    def chunk(self, event: JSON) -> Parsed | None:
        """One chunk's text and thinking (None when it has neither to show now)."""
        if event.get("usage"):
            self.usage = event["usage"]
        choices = event.get("choices") or []
        if not choices:
            return None
        choice = choices[0]
        self.finish = choice.get("finish_reason") or self.finish
        delta = choice.get("delta") or {}
        for call in delta.get("tool_calls") or []:
            slot = self.calls.setdefault(
                int(call.get("index", len(self.calls))),
                {"function": {"name": "", "arguments": ""}},
            )
            slot["id"] = slot.get("id") or call.get("id")  # the agent faces show it
            fn = call.get("function") or {}
            # Named once: llama-cpp-python's server repeats the name in every delta.
            slot["function"]["name"] = slot["function"]["name"] or fn.get("name") or ""
            slot["function"]["arguments"] += fn.get("arguments") or ""
        content = delta.get("content") or ""
        thinking = reasoning(delta)
        return Parsed(content, thinking) if content or thinking else None


@dataclass
class RawCall(Call):
    """A call whose arguments came as text that is not a JSON object: passed on as they came
    (as an empty object where the face needs one)."""

    raw: str = ""

    @property
    def arguments_json(self) -> str:
        return self.raw


def call(index: int, slot: JSON) -> Call:
    fn = slot.get("function") or {}
    text = fn.get("arguments") or ""
    name = str(fn.get("name") or "")
    call_id = slot.get("id") or f"call_{index}"
    try:
        arguments = bounded_json.loads(text) if text.strip() else {}
    except ValueError:
        arguments = None
    if isinstance(arguments, dict):
        return Call(index, name, arguments, call_id)
    return RawCall(index, name, {}, call_id, raw=text if isinstance(text, str) else "")


@dataclass
class Reply:
    """A Chat Completions answer, chunk by chunk or whole, as parsed pieces: text and thinking
    as they come, the calls whole at the end (as a local answer gives them). `stops` are the
    request's stop sequences: vLLM names the one that ended the answer in `stop_reason`. Its
    counts are the upstream's `usage` (0 where it reports none, as llama-cpp-python's server
    in a stream)."""

    stops: tuple[str, ...] = ()
    state: StreamState = field(default_factory=StreamState)
    stop_sequence: str | None = None

    def chunk(self, event: JSON) -> Parsed | None:
        shown = self.state.chunk(event)
        self._stopped_by(event.get("choices"))
        return shown

    def whole_answer(self, completion: JSON) -> Parsed:
        """A whole completion: its one piece, the calls included (no `end()` after it)."""
        choices = completion.get("choices") or [{}]
        message = choices[0].get("message") or {}
        self.state.usage = completion.get("usage")
        self.state.finish = choices[0].get("finish_reason")
        self._stopped_by(choices)
        self.state.calls = dict(enumerate(message.get("tool_calls") or []))
        return Parsed(message.get("content") or "", reasoning(message), self.calls)

    def end(self) -> Parsed:
        return Parsed(calls=self.calls)

    def _stopped_by(self, choices: Any) -> None:
        said = choices[0].get("stop_reason") if isinstance(choices, list) and choices else None
        if isinstance(said, str) and said in self.stops:
            self.stop_sequence = said

    @property
    def calls(self) -> list[Call]:
        return [call(i, self.state.calls[i]) for i in sorted(self.state.calls)]

    @property
    def finish_reason(self) -> str | None:
        finish = self.state.finish
        return finish if isinstance(finish, str) else None

    def _usage(self) -> JSON:
        return self.state.usage if isinstance(self.state.usage, dict) else {}

    @property
    def prompt_tokens(self) -> int:
        return int(self._usage().get("prompt_tokens") or 0)

    @property
    def completion_tokens(self) -> int:
        return int(self._usage().get("completion_tokens") or 0)

    @property
    def cached_tokens(self) -> int:
        details = self._usage().get("prompt_tokens_details")
        return int(details.get("cached_tokens") or 0) if isinstance(details, dict) else 0
