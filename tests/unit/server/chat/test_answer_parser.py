"""How an answer's text is split into thinking, content and tool calls, for every call format
(pure logic: the live tests with real models are test_tool_calls.py, test_tool_call_formats.py
and test_thinking.py), which format each real template names, and the grammar of each format
accepts its own calls and nothing else (with SmolLM2's vocabulary)."""

from __future__ import annotations

import llguidance
import pytest
from llguidance.llamacpp import lltokenizer_from_vocab

from localserve.ground.call_formats import GENERIC, HERMES, LLAMA3, MISTRAL, call_format, thinks
from localserve.server.chat.answer_parser import AnswerParser
from localserve.server.chat.tool_calls import grammar, read_tools
from tests.support.real_templates import template_text

# llguidance reads the vocabulary through a llama.cpp name deprecated in 0.3.36, once a token.
pytestmark = pytest.mark.filterwarnings("ignore:llama_token_get_attr:DeprecationWarning")

WEATHER = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
TOOLS = {"tools": [{"type": "function", "function": {"name": "w", "parameters": WEATHER}}]}
CALLS = {
    HERMES: 'I will look. <tool_call>\n{"name": "w", "arguments": {"city": "Paris"}}\n</tool_call>',
    MISTRAL: 'I will look. [TOOL_CALLS][{"name": "w", "arguments": {"city": "Paris"}}]',
    LLAMA3: 'I will look. {"name": "w", "parameters": {"city": "Paris"}}',
    GENERIC: 'I will look. {"tool_calls": [{"name": "w", "arguments": {"city": "Paris"}}]}',
}


def split(text: str, fmt=None, step: int = 3, **kw) -> tuple[str, str, list]:
    """Feed `text` a few characters at a time, as a stream would."""
    parser = AnswerParser(fmt, **kw)
    parts = [parser.feed(text[i : i + step]) for i in range(0, len(text), step)]
    parts.append(parser.finish())
    content = "".join(p.content for p in parts)
    thinking = "".join(p.thinking for p in parts)
    return content, thinking, [(c.name, c.arguments) for p in parts for c in p.calls]


@pytest.mark.parametrize("fmt", list(CALLS), ids=lambda f: f.family)
def test_each_format_gives_the_text_before_a_call_as_content_and_the_call_apart(fmt) -> None:
    assert split(CALLS[fmt], fmt) == ("I will look. ", "", [("w", {"city": "Paris"})])


def test_parallel_calls_come_apart_in_order() -> None:
    text = (
        '<tool_call>\n{"name": "a", "arguments": {}}\n</tool_call>\n'
        '<tool_call>\n{"name": "b", "arguments": {"x": 1}}\n</tool_call>'
    )
    assert split(text, HERMES)[2] == [("a", {}), ("b", {"x": 1})]


def test_a_call_cut_short_is_given_back_as_content() -> None:
    text = 'Sure <tool_call>\n{"name": "w", "argum'
    assert split(text, HERMES) == (text, "", [])


def test_a_call_nested_past_the_decoders_stack_is_given_back_as_content() -> None:
    text = '<tool_call>\n{"name": "w", "arguments": ' + "[" * 5000
    assert split(text, HERMES, step=len(text)) == (text, "", [])


def test_a_less_than_sign_that_starts_no_trigger_streams_as_content() -> None:
    assert split("a < b and <b> tags", HERMES) == ("a < b and <b> tags", "", [])


def test_text_without_tools_passes_through_whole() -> None:
    assert split('<tool_call>\n{"name": "w"}') == ('<tool_call>\n{"name": "w"}', "", [])


def test_a_think_block_at_the_start_is_thinking() -> None:
    assert split("<think>sky, light</think>\n\nRayleigh.", thinking=True) == (
        "Rayleigh.",
        "sky, light",
        [],
    )


def test_a_prompt_that_opened_the_block_makes_the_first_text_thinking() -> None:
    assert split("sky, light</think>Rayleigh.", thinking=True, thinking_open=True) == (
        "Rayleigh.",
        "sky, light",
        [],
    )


def test_blank_lines_after_the_block_are_dropped_when_they_come_as_pieces_of_their_own() -> None:
    # A real model's `</think>` and "\n\n" are tokens of their own, so pieces of their own.
    parser = AnswerParser(thinking=True, thinking_open=True)
    parts = [parser.feed(p) for p in ("sky, light", "</think>", "\n\n", "Rayleigh.", "\n\nSo.")]
    parts.append(parser.finish())
    assert "".join(p.thinking for p in parts) == "sky, light"
    assert "".join(p.content for p in parts) == "Rayleigh.\n\nSo."


def test_an_unclosed_think_block_is_all_thinking() -> None:
    assert split("still thinking", thinking=True, thinking_open=True) == ("", "still thinking", [])


def test_a_thinking_model_that_skips_the_block_answers_in_content() -> None:
    assert split("Rayleigh.", thinking=True) == ("Rayleigh.", "", [])


def test_a_call_after_thinking_is_parsed() -> None:
    text = '<think>need weather</think><tool_call>\n{"name": "w", "arguments": {}}\n</tool_call>'
    assert split(text, HERMES, thinking=True) == ("", "need weather", [("w", {})])


@pytest.mark.parametrize(
    "template, fmt",
    [
        (None, GENERIC),
        ("{% for m in messages %}{{ m.content }}{% endfor %}", GENERIC),
        ("{% if tools %}<tool_call>{% endif %}", HERMES),
        ("{% if tools %}[TOOL_CALLS]{% endif %}", MISTRAL),
        ('{% if tools %}<|start_header_id|>"parameters"{% endif %}', LLAMA3),
    ],
)
def test_the_template_names_its_call_format(template, fmt) -> None:
    assert call_format(template) is fmt


@pytest.mark.parametrize(
    "name, fmt",
    [("llama3.1", LLAMA3), ("llama3.2", LLAMA3), ("mistral-nemo", MISTRAL), ("qwq", HERMES)],
)
def test_a_real_template_names_the_call_format_its_model_was_tuned_on(name, fmt) -> None:
    assert call_format(template_text(name)) is fmt


@pytest.mark.parametrize("name", ["qwq", "qwen3"])
def test_a_real_reasoning_template_is_read_as_thinking(name) -> None:
    assert thinks(template_text(name))


@pytest.fixture(scope="module")
def tokenizer():
    import llama_cpp as ll

    from localserve.store.resolve import resolve

    ll.llama_backend_init()
    params = ll.llama_model_default_params()
    params.vocab_only = True
    model = ll.llama_model_load_from_file(resolve("smollm2").path.encode(), params)
    vocab = ll.llama_model_get_vocab(model)
    yield lltokenizer_from_vocab(vocab, n_vocab=ll.llama_vocab_n_tokens(vocab))
    ll.llama_model_free(model)


def accepts(tokenizer, fmt, choice: str, text: str) -> bool:
    compiled = llguidance.LLMatcher.grammar_from_lark(
        grammar(read_tools({**TOOLS, "tool_choice": choice}), fmt).text
    )
    matcher = llguidance.LLMatcher(tokenizer, compiled)
    tokens = tokenizer.tokenize_str(text)
    return matcher.validate_tokens(tokens) == len(tokens) and not matcher.is_error()


@pytest.mark.parametrize("fmt", list(CALLS), ids=lambda f: f.family)
def test_the_auto_grammar_takes_text_then_a_call_of_its_format(tokenizer, fmt) -> None:
    assert accepts(tokenizer, fmt, "auto", CALLS[fmt])


@pytest.mark.parametrize("fmt", list(CALLS), ids=lambda f: f.family)
def test_the_required_grammar_takes_a_call_and_no_text_before_it(tokenizer, fmt) -> None:
    call = CALLS[fmt].removeprefix("I will look. ")
    assert accepts(tokenizer, fmt, "required", call)
    assert not accepts(tokenizer, fmt, "required", CALLS[fmt])


@pytest.mark.parametrize("fmt", list(CALLS), ids=lambda f: f.family)
def test_a_call_to_an_unknown_function_or_with_bad_arguments_is_refused(tokenizer, fmt) -> None:
    call = CALLS[fmt].removeprefix("I will look. ")
    assert not accepts(tokenizer, fmt, "required", call.replace('"w"', '"x"'))
    assert not accepts(tokenizer, fmt, "required", call.replace('"city"', '"town"'))
