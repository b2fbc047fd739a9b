"""How an answer's text is split into thinking, content and tool calls, in the call formats that
real chat templates write (read off the templates themselves: formats/call_syntax.py), which
templates get a format of their own, and the grammar of each format takes its own calls and
nothing else (with SmolLM2's vocabulary). Pure logic: the live tests with real models are
test_tool_calls.py, test_tool_call_formats.py and test_thinking.py; every template of the corpus
is round-tripped in tests/unit/formats/test_call_syntax.py."""

from __future__ import annotations

from string import Template

import pytest

from localserve.formats.call_syntax import syntax_of
from localserve.ground.call_formats import GENERIC, CallFormat
from localserve.server.chat import call_grammar
from localserve.server.chat.answer_parser import THINK, AnswerParser
from tests.support.grammar_support import VOCAB_WARNING, accepts, tokenizer  # noqa: F401
from tests.support.template_corpus import template

pytestmark = pytest.mark.filterwarnings(VOCAB_WARNING)

HERMES = "Qwen-Qwen2.5-7B-Instruct"  # a JSON object inside <tool_call> tags
MISTRAL = "mistralai-Mistral-Nemo-Instruct-2407"  # a JSON list after [TOOL_CALLS], with ids
LLAMA3 = "meta-llama-Llama-3.1-8B-Instruct"  # a bare JSON object, "parameters"
XML = "Qwen3-Coder"  # one <parameter=...> tag a parameter
# A call of `fn` with the argument `key`, as each format writes it.
CALLS = {
    HERMES: '<tool_call>\n{"name": "$fn", "arguments": {"$key": "Paris"}}\n</tool_call>',
    MISTRAL: '[TOOL_CALLS][{"name": "$fn", "arguments": {"$key": "Paris"}, "id": "a1B2c3D4e"}]',
    LLAMA3: '{"name": "$fn", "parameters": {"$key": "Paris"}}',
    XML: "<tool_call>\n<function=$fn>\n<parameter=$key>\nParis\n</parameter>\n</function>\n"
    "</tool_call>",
    "generic": '{"tool_calls": [{"name": "$fn", "arguments": {"$key": "Paris"}}]}',
}
WEATHER = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
TEXT_PARAMS = {"w": {"city"}, "a": set(), "b": set()}


def fmt_of(name: str) -> CallFormat:
    return GENERIC if name == "generic" else syntax_of(template(name))[0]


def call(name: str, fn: str = "w", key: str = "city") -> str:
    return Template(CALLS[name]).substitute(fn=fn, key=key)


def split(text: str, fmt: CallFormat | None = None, step: int = 3, **kw) -> tuple[str, str, list]:
    """Feed `text` a few characters at a time, as a stream would."""
    parser = AnswerParser(fmt, text_params=TEXT_PARAMS, **kw)
    parts = [parser.feed(text[i : i + step]) for i in range(0, len(text), step)]
    parts.append(parser.finish())
    content = "".join(p.content for p in parts)
    thinking = "".join(p.thinking for p in parts)
    return content, thinking, [(c.name, c.arguments) for p in parts for c in p.calls]


# -- content and calls -------------------------------------------------------------------------


@pytest.mark.parametrize("name", list(CALLS))
def test_each_format_gives_the_text_before_a_call_as_content_and_the_call_apart(name) -> None:
    text = "I will look. " + call(name)
    assert split(text, fmt_of(name)) == ("I will look. ", "", [("w", {"city": "Paris"})])


@pytest.mark.parametrize(
    "name, text",
    [
        (
            HERMES,
            '<tool_call>\n{"name": "a", "arguments": {"x": 1}}\n</tool_call>\n'
            '<tool_call>\n{"name": "b", "arguments": {"x": 2}}\n</tool_call>',
        ),
        (
            XML,
            "<tool_call>\n<function=a>\n<parameter=x>\n1\n</parameter>\n</function>\n</tool_call>\n"
            "<tool_call>\n<function=b>\n<parameter=x>\n2\n</parameter>\n</function>\n</tool_call>",
        ),
    ],
)
def test_parallel_calls_come_apart_in_order(name, text) -> None:
    assert split(text, fmt_of(name)) == ("", "", [("a", {"x": 1}), ("b", {"x": 2})])


def test_a_parameter_call_without_arguments_as_its_template_writes_it_is_a_call() -> None:
    text = "<tool_call>\n<function=a>\n</function>\n</tool_call>"
    assert split(text, fmt_of(XML)) == ("", "", [("a", {})])


def test_a_mistral_call_without_its_id_leaves_no_markup_in_the_content() -> None:
    text = '[TOOL_CALLS][{"name": "w", "arguments": {"city": "Paris"}}]'
    assert split(text, fmt_of(MISTRAL)) == ("", "", [("w", {"city": "Paris"})])


def test_a_call_cut_short_at_the_answers_end_is_dropped() -> None:
    text = 'Sure <tool_call>\n{"name": "w", "argum'
    assert split(text, fmt_of(HERMES)) == ("Sure ", "", [])


def test_a_trigger_cut_short_at_the_answers_end_does_not_reach_the_content() -> None:
    assert split("Let me check. <tool", fmt_of(HERMES)) == ("Let me check. ", "", [])


def test_an_unclosed_parameter_call_whose_values_are_whole_is_a_call() -> None:
    text = "<tool_call>\n<function=w>\n<parameter=city>\nParis\n</parameter>\n"
    assert split(text, fmt_of(XML)) == ("", "", [("w", {"city": "Paris"})])


def test_a_call_nested_past_the_decoders_stack_is_given_back_as_content() -> None:
    text = '<tool_call>\n{"name": "w", "arguments": ' + "[" * 5000
    assert split(text, fmt_of(HERMES), step=len(text)) == (text, "", [])


def test_a_less_than_sign_that_starts_no_trigger_streams_as_content() -> None:
    assert split("a < b and <b> tags", fmt_of(HERMES)) == ("a < b and <b> tags", "", [])


def test_text_without_tools_passes_through_whole() -> None:
    assert split('<tool_call>\n{"name": "w"}') == ('<tool_call>\n{"name": "w"}', "", [])


# -- thinking ----------------------------------------------------------------------------------


def test_a_think_block_at_the_start_is_thinking() -> None:
    assert split("<think>sky, light</think>\n\nRayleigh.", reasoning=THINK) == (
        "Rayleigh.",
        "sky, light",
        [],
    )


def test_a_prompt_that_opened_the_block_makes_the_first_text_thinking() -> None:
    assert split("sky, light</think>Rayleigh.", reasoning=THINK, thinking_open=True) == (
        "Rayleigh.",
        "sky, light",
        [],
    )


def test_blank_lines_after_the_block_are_dropped_when_they_come_as_pieces_of_their_own() -> None:
    # A real model's `</think>` and "\n\n" are tokens of their own, so pieces of their own.
    parser = AnswerParser(reasoning=THINK, thinking_open=True)
    parts = [parser.feed(p) for p in ("sky, light", "</think>", "\n\n", "Rayleigh.", "\n\nSo.")]
    parts.append(parser.finish())
    assert "".join(p.thinking for p in parts) == "sky, light"
    assert "".join(p.content for p in parts) == "Rayleigh.\n\nSo."


def test_an_unclosed_think_block_is_all_thinking() -> None:
    assert split("still thinking", reasoning=THINK, thinking_open=True) == (
        "",
        "still thinking",
        [],
    )


def test_a_thinking_model_that_skips_the_block_answers_in_content() -> None:
    assert split("Rayleigh.", reasoning=THINK) == ("Rayleigh.", "", [])


def test_a_call_after_thinking_is_parsed() -> None:
    text = '<think>need weather</think><tool_call>\n{"name": "w", "arguments": {}}\n</tool_call>'
    assert split(text, fmt_of(HERMES), reasoning=THINK) == ("", "need weather", [("w", {})])


def test_a_call_written_inside_the_thinking_ends_it_and_is_a_call() -> None:
    text = "need weather\n" + call(HERMES)
    content, thinking, calls = split(text, fmt_of(HERMES), reasoning=THINK, thinking_open=True)
    assert (content, thinking.rstrip(), calls) == ("", "need weather", [("w", {"city": "Paris"})])


def test_a_close_after_a_call_written_inside_the_thinking_is_dropped() -> None:
    text = "need weather\n" + call(HERMES) + "\n</think>\n\n"
    assert split(text, fmt_of(HERMES), reasoning=THINK, thinking_open=True)[0] == ""


# -- the format a template names ---------------------------------------------------------------


def harmony(text: str) -> tuple[str, str, list]:
    fmt, reasoning = syntax_of(template("gpt-oss"))
    return split(text, fmt, reasoning=reasoning)


def test_a_harmony_answer_after_its_analysis_carries_no_channel_markup() -> None:
    text = (
        "<|channel|>analysis<|message|>Easy.<|end|>"
        "<|start|>assistant<|channel|>final<|message|>Paris is sunny.<|return|>"
    )
    assert harmony(text) == ("Paris is sunny.", "Easy.", [])


def test_a_harmony_call_on_the_commentary_channel_is_a_call() -> None:
    text = (
        "<|channel|>analysis<|message|>Need weather.<|end|><|start|>assistant"
        '<|channel|>commentary to=functions.w<|channel|>commentary json<|message|>{"city": "Paris"}'
        "<|call|>"
    )
    content, thinking, calls = harmony(text)
    assert (content.strip(), thinking, calls) == ("", "Need weather.", [("w", {"city": "Paris"})])


@pytest.mark.parametrize(
    "source",
    [None, "", "{% for m in messages %}{{ m.content }}{% endfor %}"],
    ids=["none", "empty", "no-tools"],
)
def test_a_template_that_renders_no_tools_gets_the_generic_format(source) -> None:
    assert syntax_of(source)[0] is GENERIC


@pytest.mark.parametrize(
    "name, trigger",
    [
        (HERMES, "<tool_call>"),
        ("Qwen-QwQ-32B", "<tool_call>"),
        (MISTRAL, "[TOOL_CALLS]"),
        (LLAMA3, '{"name": "'),
        ("meta-llama-Llama-3.2-3B-Instruct", '{"name": "'),
        (XML, "<tool_call>"),
    ],
)
def test_a_real_template_derives_the_call_format_its_model_was_tuned_on(name, trigger) -> None:
    fmt = fmt_of(name)
    assert fmt is not GENERIC and fmt.native
    assert fmt.trigger == trigger


# -- the grammar of each format ----------------------------------------------------------------


def grammar_of(name: str, choice: str):
    return call_grammar.grammar([("w", WEATHER)], choice, True, fmt_of(name), "")


@pytest.mark.parametrize("name", list(CALLS))
def test_the_auto_grammar_takes_text_then_a_call_of_its_format(tokenizer, name) -> None:
    assert accepts(tokenizer, grammar_of(name, "auto"), "I will look. " + call(name))


@pytest.mark.parametrize("name", list(CALLS))
def test_the_auto_grammar_takes_text_without_a_call(tokenizer, name) -> None:
    assert accepts(tokenizer, grammar_of(name, "auto"), "It is sunny in Paris.")


@pytest.mark.parametrize("name", list(CALLS))
def test_the_required_grammar_takes_a_call_and_no_text_before_it(tokenizer, name) -> None:
    assert accepts(tokenizer, grammar_of(name, "required"), call(name))
    assert not accepts(tokenizer, grammar_of(name, "required"), "I will look. " + call(name))


@pytest.mark.parametrize("name", list(CALLS))
def test_a_call_to_an_unknown_function_is_refused(tokenizer, name) -> None:
    assert not accepts(tokenizer, grammar_of(name, "required"), call(name, fn="x"))


@pytest.mark.parametrize("name", list(CALLS))
def test_a_call_with_an_unknown_argument_is_refused(tokenizer, name) -> None:
    assert not accepts(tokenizer, grammar_of(name, "required"), call(name, key="town"))
