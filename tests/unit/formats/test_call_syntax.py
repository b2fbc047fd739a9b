"""A chat template's own call syntax, read off the template (formats/call_syntax.py), checked
against the template itself for every template of the corpus that renders tool calls
(tests/support/template_corpus.py): a call rendered through the template, as a past turn, reads
back as the same call with no markup left in the content, and so do two calls where the
template renders two in a turn; the grammar that forces calls takes the model's part of that
rendering, token by token (SmolLM2's vocabulary). And: every family the project serves derives
a format of its own, writes its arguments in the style its template does, and the reasoning
templates name their thinking block's markers."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Any

import pytest

from localserve.formats.call_syntax import syntax_of
from localserve.formats.chat_template import ChatTemplate
from localserve.ground.call_formats import GENERIC, CallFormat
from localserve.server.chat import call_grammar
from localserve.server.chat.answer_parser import AnswerParser
from tests.support.grammar_support import VOCAB_WARNING, accepts, tokenizer  # noqa: F401
from tests.support.template_corpus import FAMILIES, corpus, template

pytestmark = pytest.mark.filterwarnings(VOCAB_WARNING)

WEATHER = {
    "type": "object",
    "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
    "required": ["city", "days"],
}
TIME = {"type": "object", "properties": {"zone": {"type": "string"}}, "required": ["zone"]}
FUNCTIONS = [("get_weather", WEATHER), ("get_time", TIME)]
TOOLS = [
    {"type": "function", "function": {"name": n, "description": "A tool.", "parameters": s}}
    for n, s in FUNCTIONS
]
TEXT_PARAMS = {
    n: {k for k, v in s["properties"].items() if call_grammar.is_text(v)} for n, s in FUNCTIONS
}
Call = tuple[str, str, dict[str, Any]]  # id, name, arguments
# Mistral's templates insist on ids of 9 letters and digits.
ONE: list[Call] = [("qZ7xW3kP9", "get_weather", {"city": "Paris", "days": 3})]
TWO: list[Call] = [*ONE, ("rY8vU4jN2", "get_time", {"zone": "CET"})]
ASK = [{"role": "user", "content": "Weather in Paris, and the time there?"}]
ANSWER = "PLAIN_ANSWER_TEXT"
THOUGHT = "PLAIN_THOUGHT_TEXT"

DERIVED = [name for name, source in corpus().items() if syntax_of(source)[0] is not GENERIC]
PARALLEL = [name for name in DERIVED if syntax_of(corpus()[name])[0].parallel]
# Templates whose calls a derived format does not read yet, and why.
KIMI_K3 = (
    "Kimi K3 writes its answer in sections (<|open|>response<|sep|>...) that a derived format "
    "leaves in the content: it needs a handler of its own"
)
# One call reads back (the answer's sections after it are left in the content); two do.
NOT_READ = {"Kimi-K3": KIMI_K3}
NOT_TAKEN = NOT_READ


def fmt_of(name: str) -> CallFormat:
    return syntax_of(template(name))[0]


def each(names: list[str], known: dict[str, str]) -> list[Any]:
    return [
        pytest.param(n, marks=pytest.mark.xfail(strict=True, reason=known[n])) if n in known else n
        for n in names
    ]


@dataclass
class Rendered:
    text: str  # the model's part of the rendering: what it would have written
    thought: str  # the thought the text begins with, if any
    opened: bool  # the prompt left a reasoning block open
    lead: str  # what the forced grammar writes before the calls (as server/chat/plan.py says)


def rendered(name: str, calls: list[Call], thought: bool = False) -> Rendered:
    """`calls` as the model would write them, by the template's rendering of them as a past
    turn; after a thought where the prompt opens a reasoning block and `thought` asks for one
    (and the template renders a past turn's thought)."""
    source = template(name)
    fmt, reasoning = syntax_of(source)
    chat = ChatTemplate(source, "", "")
    prompt = chat.render_raw(ASK, True, tools=TOOLS)
    end = prompt.rstrip()
    closed = reasoning is not None and end.endswith(reasoning.close)
    plain = model_part(chat, prompt, calls, "")
    if closed and reasoning is not None:  # the prompt closed the block: the model writes calls
        plain = plain.lstrip().removeprefix(reasoning.close).lstrip()
    if reasoning is None or not end.endswith(reasoning.open):
        return Rendered(plain, "", False, "" if closed else fmt.lead_fresh)
    lead = fmt.lead_open
    thinking = model_part(chat, prompt, calls, THOUGHT)
    if THOUGHT not in thinking:  # the template keeps no thought of a past turn
        thinking = ""
    if thought and thinking:
        return Rendered(thinking, THOUGHT, True, lead)
    if reasoning.close in plain:
        return Rendered(plain, "", True, lead)
    if thinking:  # the template closes the block only after a thought: what it writes then
        return Rendered(thinking.split(THOUGHT, 1)[1], "", True, lead)
    return Rendered(reasoning.close_text + plain.lstrip(), "", True, lead)


def model_part(chat: ChatTemplate, prompt: str, calls: list[Call], thought: str) -> str:
    """The rendering of the turn with `calls` (and `thought`), less the prompt before it and
    the turn's end after it."""
    turn: dict[str, Any] = {"role": "assistant", "content": ""}
    if thought:  # under each name templates read a thought by
        turn.update(reasoning_content=thought, thinking=thought, reasoning=thought)
    turn["tool_calls"] = [
        {"id": i, "type": "function", "function": {"name": n, "arguments": a}} for i, n, a in calls
    ]
    full = chat.render_raw([*ASK, turn], False, tools=TOOLS)
    start = len(prompt)
    if not full.startswith(prompt):
        # The past turn renders otherwise than the prompt ends: from the last marker they share.
        start = len(os.path.commonprefix([prompt, full]))
        while start and full[start - 1] not in ">]\n}":
            start -= 1
    text = full[start:]
    # The model stops where a plain answer's turn ends, and blank space before that is no part
    # of what it writes.
    answer = chat.render_raw([*ASK, {"role": "assistant", "content": ANSWER}], False, tools=TOOLS)
    end_of_turn = answer[answer.index(ANSWER) + len(ANSWER) :]
    first = re.match(r"\s*(<[^<>]+>|\[[^\[\]]+\])", end_of_turn)
    after = text.rindex(calls[-1][1])
    if first and first.group(1) in text[after:]:
        return text[: text.index(first.group(1), after)].rstrip()
    if text.endswith(end_of_turn):
        return text[: len(text) - len(end_of_turn)].rstrip()
    # Else at the first marker of the turn's end that the calls themselves do not write.
    for marker in re.findall(r"<[^<>]+>|\[[^\[\]]+\]", end_of_turn):
        if marker not in text[:after] and marker in text[after:]:
            return text[: text.index(marker, after)].rstrip()
    return text.rstrip()


def read_back(name: str, turn: Rendered) -> tuple[str, str, list]:
    """The rendered turn fed to the template's parser a few characters at a time, as a model's
    answer streams: its content, thinking and calls."""
    fmt, reasoning = syntax_of(template(name))
    parser = AnswerParser(fmt, reasoning, turn.opened, TEXT_PARAMS)
    text = turn.text
    parts = [parser.feed(text[i : i + 3]) for i in range(0, len(text), 3)]
    parts.append(parser.finish())
    content = "".join(p.content for p in parts)
    thinking = "".join(p.thinking for p in parts)
    return content, thinking, [(c.name, c.arguments) for p in parts for c in p.calls]


def forced_grammar_takes(tokenizer, name: str, calls: list[Call]) -> bool:
    """The grammar of `tool_choice` "required" (which lets no thought come first) takes the
    rendered calls."""
    turn = rendered(name, calls)
    grammar = call_grammar.grammar(FUNCTIONS, "required", True, fmt_of(name), turn.lead)
    return accepts(tokenizer, grammar, turn.text)


# -- every template that renders calls ---------------------------------------------------------


def test_most_templates_of_the_corpus_derive_a_call_format() -> None:
    assert len(DERIVED) >= 50 and len(PARALLEL) >= 40


@pytest.mark.parametrize("name", each(DERIVED, NOT_READ))
def test_a_call_the_template_renders_reads_back_as_the_same_call(name) -> None:
    turn = rendered(name, ONE, thought=True)
    content, thinking, calls = read_back(name, turn)
    assert (content.strip(), thinking.strip()) == ("", turn.thought)
    assert calls == [(n, a) for _, n, a in ONE]


@pytest.mark.parametrize("name", PARALLEL)
def test_two_calls_the_template_renders_read_back_in_order(name) -> None:
    turn = rendered(name, TWO, thought=True)
    content, thinking, calls = read_back(name, turn)
    assert (content.strip(), thinking.strip()) == ("", turn.thought)
    assert calls == [(n, a) for _, n, a in TWO]


@pytest.mark.parametrize("name", each(DERIVED, NOT_TAKEN))
def test_the_forced_grammar_takes_a_call_as_the_template_renders_it(tokenizer, name) -> None:
    assert forced_grammar_takes(tokenizer, name, ONE)


@pytest.mark.parametrize("name", each(PARALLEL, NOT_TAKEN))
def test_the_forced_grammar_takes_two_calls_as_the_template_renders_them(tokenizer, name) -> None:
    assert forced_grammar_takes(tokenizer, name, TWO)


# -- the families the project serves -----------------------------------------------------------


@pytest.mark.parametrize("family", list(FAMILIES))
def test_every_family_served_derives_a_call_format_of_its_own(family) -> None:
    assert fmt_of(family) is not GENERIC


PARAMS = {"qwen3-coder", "qwen3.5", "glm-4.6", "minimax-m2", "gemma-4"}


@pytest.mark.parametrize("family", list(FAMILIES))
def test_each_family_writes_its_arguments_as_its_template_does(family) -> None:
    expected = "params" if family in PARAMS else "json"
    assert fmt_of(family).args == expected


@pytest.mark.parametrize(
    "name, opening",
    [
        ("qwen3.5", "<think>"),
        ("Qwen-Qwen3-0.6B", "<think>"),
        ("Qwen-QwQ-32B", "<think>"),
        ("gpt-oss", "<|channel|>analysis<|message|>"),
        ("gemma-4", "<|channel>thought"),
    ],
)
def test_a_reasoning_template_names_the_opening_of_its_thinking_block(name, opening) -> None:
    reasoning = syntax_of(template(name))[1]
    assert reasoning is not None and reasoning.open == opening


@pytest.mark.parametrize(
    "name", ["Qwen-Qwen2.5-7B-Instruct", "llama3.1", "mistralai-Mistral-Nemo-Instruct-2407"]
)
def test_a_template_without_reasoning_names_no_thinking_block(name) -> None:
    assert syntax_of(template(name))[1] is None
