"""Tool and response schemas never fail a request for a keyword the grammar cannot enforce
(#44): tools compile leniently and what went unenforced is said; a strict response schema keeps
the old rule, refused where a keyword cannot be enforced (server/chat/structured.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from localserve.ground.call_formats import GENERIC, HERMES, LLAMA3, MISTRAL
from localserve.server.chat.structured import header_text, schema_grammar, unenforced
from localserve.server.chat.tool_calls import grammar, read_tools
from tests.support.tools_support import NAMES_BY_PATTERN

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


@pytest.mark.parametrize("fmt", [HERMES, MISTRAL, LLAMA3, GENERIC], ids=lambda f: f.family)
def test_claude_codes_own_tool_list_compiles(fmt) -> None:
    tools = json.loads(CLAUDE_CODE.read_text(encoding="utf-8"))["tools"]
    dropped, failed = unenforced(grammar(read_tools(openai_tools(tools)), fmt))
    assert failed is None
    assert len(tools) >= 20


def test_a_tool_keyword_the_grammar_lacks_is_left_unenforced_and_named() -> None:
    tools = openai_tools([{"name": "tag", "input_schema": NAMES_BY_PATTERN}])
    dropped, failed = unenforced(grammar(read_tools(tools), HERMES))
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
