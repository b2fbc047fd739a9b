"""Tool and response schemas never fail a request for a keyword the grammar cannot enforce
(#44): tools compile leniently, in each call format a template derives, and what went
unenforced is said; a strict response schema keeps the old rule, refused where a keyword cannot
be enforced (server/chat/structured.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from localserve.formats.call_syntax import syntax_of
from localserve.ground.call_formats import GENERIC, CallFormat
from localserve.ground.sampling import Grammar
from localserve.server.chat import call_grammar
from localserve.server.chat.structured import header_text, schema_grammar, unenforced
from localserve.server.chat.tool_calls import read_tools
from tests.support.grammar_support import VOCAB_WARNING, accepts, tokenizer  # noqa: F401
from tests.support.template_corpus import template
from tests.support.tools_support import NAMES_BY_PATTERN

pytestmark = pytest.mark.filterwarnings(VOCAB_WARNING)

CLAUDE_CODE = Path(__file__).parents[3] / "support" / "agent_requests" / "claude_code_tools.json"


def openai_tools(tools: list[dict[str, Any]]) -> dict[str, Any]:
    """Anthropic's tools (name, description, input_schema) as OpenAI's function tools."""
    return {
        "tools": [
            {
                "type": "function",
                "function": {
                    "name": t["name"],
                    "description": t.get("description", ""),
                    "parameters": t["input_schema"],
                },
            }
            for t in tools
        ]
    }


# A JSON object of arguments in each place models write it, and one parameter at a time.
TEMPLATES = [
    "Qwen-Qwen2.5-7B-Instruct",
    "mistralai-Mistral-Nemo-Instruct-2407",
    "meta-llama-Llama-3.1-8B-Instruct",
    "Qwen3-Coder",
    "google-gemma-4-31B-it",
]


def fmt_of(name: str) -> CallFormat:
    return syntax_of(template(name))[0]


def tools_grammar(body: dict[str, Any], fmt: CallFormat) -> Grammar:
    """The grammar the answer to a request with these tools is held to, as the chat plans it."""
    tools = read_tools(body)
    assert tools is not None
    functions = [(f.name, f.parameters) for f in tools.offered]
    return call_grammar.grammar(functions, tools.choice, tools.parallel, fmt, "")


@pytest.mark.parametrize("name", [*TEMPLATES, "generic"])
def test_claude_codes_own_tool_list_compiles(name) -> None:
    fmt = GENERIC if name == "generic" else syntax_of(template(name))[0]
    tools = json.loads(CLAUDE_CODE.read_text(encoding="utf-8"))["tools"]
    dropped, failed = unenforced(tools_grammar(openai_tools(tools), fmt))
    assert failed is None
    assert len(tools) >= 20


@pytest.mark.parametrize("name", TEMPLATES)
def test_a_tool_keyword_the_grammar_lacks_is_left_unenforced_and_named(name) -> None:
    tools = openai_tools([{"name": "tag", "input_schema": NAMES_BY_PATTERN}])
    dropped, failed = unenforced(tools_grammar(tools, syntax_of(template(name))[0]))
    assert failed is None
    assert any("propertyNames" in said for said in dropped)


def test_a_lenient_response_schema_leaves_the_keyword_unenforced() -> None:
    dropped, failed = unenforced(schema_grammar(NAMES_BY_PATTERN, "response_format"))
    assert failed is None and any("propertyNames" in said for said in dropped)


def test_a_strict_response_schema_with_such_a_keyword_cannot_compile() -> None:
    strict = schema_grammar(NAMES_BY_PATTERN, "response_format", strict=True)
    dropped, failed = unenforced(strict)
    assert failed is not None and "propertyNames" in failed


def test_a_schema_that_cannot_compile_at_all_is_said_so() -> None:
    broken = {"type": "string", "pattern": "[unclosed"}
    dropped, failed = unenforced(schema_grammar(broken, "response_format"))
    assert failed is not None


def test_a_header_carries_one_line_of_printable_ascii() -> None:
    assert header_text("Unknown format: h\u00f6st\r\nX-Evil: 1") == "Unknown format: h?st X-Evil: 1"


# -- a parameter written as text (Qwen3-Coder's, GLM's, MiniMax's) -----------------------------

STORY = {
    "type": "object",
    "properties": {"story": {"type": "string", "minLength": 5, "maxLength": 8, "pattern": "^a"}},
    "required": ["story"],
}


def test_a_text_parameters_keyword_its_grammar_cannot_write_is_said() -> None:
    grammar = call_grammar.grammar([("tell", STORY)], "required", False, fmt_of("Qwen3-Coder"), "")
    assert unenforced(grammar) == (("tell.story: pattern",), None)


@pytest.mark.parametrize("story, taken", [("abcd", False), ("abcdef", True), ("abcdefghij", False)])
def test_a_text_parameters_length_is_enforced(tokenizer, story, taken) -> None:
    fmt = fmt_of("Qwen3-Coder")
    grammar = call_grammar.grammar([("tell", STORY)], "required", False, fmt, "")
    text = (
        f"<tool_call>\n<function=tell>\n<parameter=story>\n{story}\n</parameter>\n"
        "</function>\n</tool_call>"
    )
    assert accepts(tokenizer, grammar, text) is taken


def test_a_tool_whose_properties_are_no_object_has_no_text_parameters() -> None:
    # Read for every answer's parser, on any template: such a schema once raised there.
    assert call_grammar.text_params([("odd", {"type": "object", "properties": [1]})]) == {
        "odd": set()
    }
